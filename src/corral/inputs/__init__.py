"""Bounded reading of untrusted text files: encodings, size, nesting depth, YAML aliases, huge numbers.

Every file corral reads (snapshots, configurations, cluster and workload specs, traces) and every
document it parses from text (an inline configuration, an API server's JSON answer) comes through this
package's face — :func:`read_text`, :func:`decode`, :func:`load_yaml`, :func:`load_yaml_all`,
:func:`load_json`, :func:`load_text_documents`, :func:`limits` — so that hostile or broken input ends in
one :class:`~corral.errors.InputError` line (exit code 2; a caller may pass its own error type, e.g.
:class:`~corral.errors.ConfigError`) within a bounded time and memory — never a crash, a hang or a
traceback. The package imports nothing of corral but :mod:`corral.errors` (DESIGN.md, floor 2):

- **size**: a file larger than ``CORRAL_MAX_INPUT_BYTES`` (default 1 GiB) is refused before it is read;
- **encoding**: UTF-8 with or without a byte-order mark and UTF-16 with a byte-order mark (what Windows
  PowerShell writes for ``kubectl get -o yaml > file``) are read; anything else (UTF-32, UTF-16 without
  a BOM, binary data) is refused with a message saying what was found and what is expected;
- **nesting**: a document nested deeper than ``CORRAL_MAX_DEPTH`` (default 200; Kubernetes objects sit
  under 30) is refused *while it is composed*, before any recursive step: libyaml's C composer recurses
  on the C stack and crashes the process at some ten thousand levels, so deep input must never reach it;
- **YAML aliases**: a document whose aliases would expand to more than ``CORRAL_MAX_ALIAS_NODES``
  (default 100,000) nodes — a "billion laughs" bomb — or that holds an alias to a node still being built
  (a recursive structure) is refused while it is composed, in time proportional to the text;
- **numbers**: an integer of more digits than Python converts (4,300) is refused with its line.

Loading speed: the C loader (libyaml) is used when the text holds no ``&`` (no anchor, hence no alias)
and a cheap upper bound on its nesting depth (:func:`depth_bound`) is within what the C composer
survives with a wide margin; if that bound passes the depth limit, the loaded documents are walked once
(no recursion) to check the real depth. Otherwise the same C parser feeds a Python composer that counts
as it goes (roughly 1.5-2x slower, only for files with anchors or thousands of ``[``/``{``). On the C
path, values are built from libyaml's nodes by
:class:`~corral.inputs.construction.FastConstruction` (half the cost of PyYAML's generic constructor,
the same values and errors). JSON's depth bound counts brackets only.

Large YAML (64 KiB and more) on that C path first tries :mod:`corral.inputs.fast_yaml`: rapidyaml
parses the text and emits it as JSON, which ``json.loads`` builds in C (less than half the CPU of this
loader on large snapshots: docs/kubernetes.md, "Performance at scale", measured by
``benchmarks/bench_allocate.py``). It is taken only when a screen
shows the values are the ones this loader builds — no tag, anchor, alias, merge key, complex key or
YAML 1.1 boolean/null word; every distinct number-like plain scalar read alike by both; libyaml's own
parser accepting the text — and otherwise steps aside, so this loader runs unchanged and its error
messages stay the ones users see. ``CORRAL_FAST_YAML=0`` switches it off; without rapidyaml (no wheel
for the platform) this loader is all there is.

Modules: :mod:`~corral.inputs.text` (size, encodings, the limits), :mod:`~corral.inputs.depth` (depth
bounds), :mod:`~corral.inputs.composer` (the counting composer), :mod:`~corral.inputs.construction` (the
C loader's construction), :mod:`~corral.inputs.fast_yaml` (rapidyaml) and
:mod:`~corral.inputs.documents` (which loader reads a text, and the error lines).
"""

from corral.inputs.depth import depth_bound
from corral.inputs.documents import load_json, load_text_documents, load_yaml, load_yaml_all
from corral.inputs.text import ErrorType, Limits, decode, limits, read_text

__all__ = [
    "ErrorType",
    "Limits",
    "decode",
    "depth_bound",
    "limits",
    "load_json",
    "load_text_documents",
    "load_yaml",
    "load_yaml_all",
    "read_text",
]
