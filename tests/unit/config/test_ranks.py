import pytest
from hypothesis import given, strategies as st

from mindspeed_prof.errors import ConfigError
from mindspeed_prof.config.ranks import beyond, expand, format_selection, parse_rank_tokens, resolve


@pytest.mark.parametrize("tokens", [["-1"], ["all"], [-1], ["0", "-1"], "ALL", ()])
def test_only_minus_one_and_all_mean_every_rank(tokens):
    assert parse_rank_tokens(tokens) == ()  # () is the canonical "all" a config holds


@pytest.mark.parametrize("tokens", [[""], [","], " , ", "", [], None, ["", ""], [" "]])
def test_a_rank_list_that_names_no_rank_is_refused_naming_the_flag(tokens):
    with pytest.raises(ConfigError) as info:
        parse_rank_tokens(tokens)
    assert str(info.value).startswith("--profile-ranks ") and "names no rank" in str(info.value)
    assert "-1/all for every rank" in str(info.value)


def test_lists_ranges_and_commas_combine_in_order_without_duplicates():
    assert parse_rank_tokens(["0,2", "4-6", "2"]) == (0, 2, range(4, 7))  # a range stays one


def test_backwards_range_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="range 7-3 runs backwards; write it as 3-7"):
        parse_rank_tokens(["7-3"])


@pytest.mark.parametrize("bad", ["-2", "x", "0-", "tp=a", "gpu=0", "tp=0,tp=1"])
def test_malformed_tokens_name_the_flag(bad):
    with pytest.raises(ConfigError, match="--profile-ranks"):
        parse_rank_tokens([bad])


@given(st.sets(st.integers(min_value=0, max_value=300), min_size=1, max_size=40))
def test_any_rank_set_written_as_ranges_parses_back(ranks):
    ordered = sorted(ranks)
    pieces, start = [], ordered[0]
    for previous, current in zip(ordered, ordered[1:] + [None]):
        if current != previous + 1:
            pieces.append(str(start) if start == previous else f"{start}-{previous}")
            start = current
    assert tuple(expand(parse_rank_tokens([",".join(pieces)]))) == tuple(ordered)


@given(st.lists(st.integers(min_value=0, max_value=63), min_size=1, max_size=10))
def test_selection_round_trips_through_its_printed_form(ranks):
    selection = parse_rank_tokens(ranks)
    assert parse_rank_tokens(format_selection(selection).split()) == selection


def _layout(tp, pp, dp):
    # Megatron's default order puts tp fastest, then dp, then pp.
    layout = {}
    for rank in range(tp * pp * dp):
        layout[rank] = {"tp": rank % tp, "dp": (rank // tp) % dp, "pp": rank // (tp * dp),
                        "cp": 0, "ep": 0, "node": rank // 4}
    return layout


def test_pp_stage_leaders_pick_one_rank_per_stage():
    assert resolve(("pp-stage-leaders",), 8, _layout(2, 2, 2)) == [0, 4]


def test_coordinate_filter_with_wildcard():
    assert resolve(parse_rank_tokens(["tp=0,dp=1,pp=*"]), 8, _layout(2, 2, 2)) == [2, 6]


def test_first_and_last_pp_stage():
    layout = _layout(2, 2, 2)
    assert resolve(("first-pp-stage",), 8, layout) == [0, 1, 2, 3]
    assert resolve(("last-pp-stage",), 8, layout) == [4, 5, 6, 7]


def test_node_selector():
    assert resolve(parse_rank_tokens(["node=1"]), 8, _layout(2, 2, 2)) == [4, 5, 6, 7]


def test_selector_matching_nothing_is_an_error():
    with pytest.raises(ConfigError, match="matches no rank"):
        resolve(parse_rank_tokens(["tp=5"]), 8, _layout(2, 2, 2))


def test_ranks_beyond_the_world_are_an_error_when_nothing_remains():
    with pytest.raises(ConfigError, match="world size 2"):
        resolve((4, 5), 2)


def test_selectors_without_layout_explain_why():
    with pytest.raises(ConfigError, match="needs the parallel layout"):
        resolve(("pp-stage-leaders",), 8, None)


def test_a_huge_range_stays_a_range_in_membership_length_and_text():
    selection = parse_rank_tokens(["0-1000000"])
    assert selection == (range(0, 1000001),)
    assert format_selection(selection) == "0-1000000"
    assert resolve(selection, 8) == list(range(8))  # only the job's part is built
    assert beyond(selection, 8) == [range(8, 1000001)]


@pytest.mark.parametrize("tokens", [["0-400000000"], ["400000000"], ["3,0-2000000"]])
def test_a_rank_beyond_any_world_size_is_refused_naming_it(tokens):
    with pytest.raises(ConfigError, match="beyond any job's world size") as info:
        parse_rank_tokens(tokens)
    assert str(info.value).startswith("--profile-ranks ")
