"""Jobs submitted at one instant (``simulation.ties``): by name as text by default (the Lucid parity
runs' order), by name with numbers as numbers (``natural``), or in a seeded random order (``shuffle``)."""

from __future__ import annotations

import pytest

from corral.errors import ConfigError
from corral.sim.workload import natural_key, tie_times, ties_options
from tests.sim.test_baselines import config, job
from tests.sim.test_engine import by_name, engine

# three 8-GPU jobs submitted together on one node of 8 GPUs: they run one after the other
JOBS = [job("job-9", 0, 100, 8), job("job-10", 0, 100, 8), job("job-11", 0, 100, 8)]


def _order(**options) -> list[str]:
    r = by_name(engine(JOBS, nodes=1, config=config("fifo"), **options).run())
    return sorted(r, key=lambda n: r[n].first_start)


def test_names_as_text_by_default():
    assert _order() == ["job-10", "job-11", "job-9"]


def test_natural_order_puts_999_before_1000():
    assert _order(ties="natural") == ["job-9", "job-10", "job-11"]
    assert natural_key("philly-999") < natural_key("philly-1000")


def test_a_seeded_shuffle_moves_the_tie_order_and_repeats():
    seen = {tuple(_order(ties="shuffle", tie_seed=s)) for s in range(6)}
    assert len(seen) > 1  # the order moves with the seed
    assert _order(ties="shuffle", tie_seed=3) == _order(ties="shuffle", tie_seed=3)


def test_tie_times_stay_below_the_next_submit():
    jobs = [*JOBS, job("later", 1e-300, 10, 1)]
    got = tie_times(jobs, "natural")
    assert got["job-9"] == 0.0 < got["job-10"] < got["job-11"] < 1e-300
    assert "later" not in got


@pytest.mark.parametrize(
    "raw,field",
    [
        ({"order": "random"}, "simulation.ties.order"),
        ({"order": "shuffle", "seed": -1}, "simulation.ties.seed"),
        ({"order": "natural", "seed": 2}, "simulation.ties.seed"),
        ({"sorder": "natural"}, "simulation.ties.sorder"),
        ("natural", "simulation.ties"),
    ],
)
def test_bad_ties_are_refused_with_their_field(raw, field):
    with pytest.raises(ConfigError) as err:
        ties_options({"ties": raw}, "c.yaml")
    assert err.value.field == field


def test_ties_options_read():
    assert ties_options({"ties": {"order": "shuffle", "seed": 4}}) == {"ties": "shuffle", "tie_seed": 4}
    assert ties_options({}) == {}
