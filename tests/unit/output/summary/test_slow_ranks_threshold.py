"""summary's slow ranks: a rank is called slow from SLOW_RANK_PCT above the median step time; the
ordinary spread of a job's ranks (a percent or so) is no finding."""

from mindspeed_prof.output.render.summary_table import summary_table
from mindspeed_prof.output.summary.compare import SLOW_RANK_PCT, slow_ranks


class Rank:
    """What slow_ranks reads of one rank's summary."""

    def __init__(self, rank, step_us, backend="torch"):
        self.rank, self.step_time, self.backend = rank, step_us, backend

    def breakdown(self):
        return {"step_time": self.step_time}


def table(ranks):
    data = {"directory": "d", "ranks": [], "slow_ranks": slow_ranks(ranks), "notes": [],
            "top": 10, "overall": {"top_kernels": [], "op_types": [], "top_ops": []}}
    return summary_table(data)


def test_ranks_within_a_percent_of_each_other_are_no_slow_ranks_and_the_table_says_so_once():
    text = table([Rank(0, 1000.0), Rank(1, 1012.0)])
    assert "Slow ranks: none (every rank's step time is within 5% of the median; the " \
           "largest deviation is rank 1, +0.6%)" in text
    assert "DEVIATION(us)" not in text


def test_a_rank_past_the_threshold_is_listed_and_only_it():
    ranks = [Rank(0, 1000.0), Rank(1, 1004.0), Rank(2, 1000.0 * (1 + SLOW_RANK_PCT / 50))]
    entries = {e["rank"]: e["slow"] for e in slow_ranks(ranks)}
    assert entries == {2: True, 1: False, 0: False}
    text = table(ranks)
    listed = text.split("Slow ranks (step time at least 5% above the median)")[1].splitlines()
    assert [line.split()[0] for line in listed[2:] if line.strip()] == ["2"]
