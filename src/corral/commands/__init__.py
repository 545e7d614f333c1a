"""Every ``corral`` command (SPEC.md §4), the top floor of the package (DESIGN.md, "The target plan"):
:mod:`~corral.commands.app` (the command group and ``main``), :mod:`~corral.commands.boundary` (one
line and an exit code for every fault: ``fail``), :mod:`~corral.commands.options` (the configuration, the
clock, the output format), :mod:`~corral.commands.schedule` (``schedule``, ``validate``),
:mod:`~corral.commands.views` (``whatif``, ``queues``), :mod:`~corral.commands.simulate` (``simulate``,
``compare``), :mod:`~corral.commands.sweep`, :mod:`~corral.commands.run`, and what they print
(:mod:`~corral.commands.tables`) or compute (:mod:`~corral.commands.whatif`). Nothing below imports it."""
