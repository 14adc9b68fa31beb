"""The report's sections as HTML, each table bounded (``MAX_ROWS``, ``MAX_TEXT``): the page's
size does not grow with the job's beyond them. Text from the files is escaped here."""

from typing import Any, Dict, List, Optional

from ..read import columns
from . import links as link_figures
from .baseline import render_diff
from .cells import MAX_LISTED, MAX_ROWS, MAX_TEXT, e, num_cell, rank_ranges, table, us_cell
from .figures import SHORT

PARTS = ("step_time", *[k for k in columns.STEP_COMPONENTS
                        if k in ("Computing", "Communication(Not Overlapped)", "Overlapped",
                                 "Free")])


def _slow_step(slow: Optional[Dict[str, Any]]) -> str:
    if not slow:
        return "-"
    grew = (f", {SHORT.get(slow['grew'], slow['grew'])} grew "
            f"{slow['grew_us'] / 1000.0:+.3f} ms") if slow.get("grew") else ""
    return f"{slow['over_median_pct']:+.0f} % over the median{grew}"


def _why(row: Dict[str, Any]) -> str:
    """The reason in words: what grew, by how much."""
    if row["by_waits"]:
        grew = row.get("grew")
        if not row["reason"]:
            return "late, cause not in the breakdown"
        if not grew:
            return row["reason"]
        amount = (f"{grew['pct']:+.0f} %" if grew.get("pct") is not None
                  else f"{grew['us_per_step'] / 1000:+.3f} ms per step")
        return f"{row['reason']}: {grew['what']} {amount}"
    if not row["reason"]:
        return "-"
    delta = row["component_deltas_us"][row["explained_by"]]
    return f"{row['reason']}: {SHORT.get(row['explained_by'])} {delta / 1000.0:+.3f} ms vs median"


class Sections:
    def __init__(self):
        self.parts: List[str] = []
        self.figures: List[tuple] = []
        self.anchors: List[tuple] = []

    def html(self) -> str:
        return "\n".join(self.parts)

    def raw(self, text: str) -> None:
        self.parts.append(text)

    def nav(self) -> str:
        return "<nav>" + "".join(f"<a href='#{a}'>{e(t)}</a>" for a, t in self.anchors) + \
            "</nav>"

    def section(self, title: str, answers: str) -> None:
        anchor = f"s{len(self.anchors)}"
        self.anchors.append((anchor, title))
        self.parts.append(f"<h2 id={anchor}>{e(title)}</h2><p class=answers>{e(answers)}</p>")

    def note(self, text: str) -> None:
        self.parts.append(f"<p class=note>{e(text, 2 * MAX_TEXT)}</p>")

    def figure(self, figure: Dict[str, Any], kind: str) -> None:
        div = f"fig{len(self.figures)}"
        self.figures.append((div, figure))
        self.parts.append(f"<div class='card {kind}' id={div}></div>")

    def grid(self, figures: List[Dict[str, Any]], kind: str) -> None:
        self.parts.append("<div class=grid>")
        for figure in figures:
            self.figure(figure, kind)
        self.parts.append("</div>")

    # -- sections ---------------------------------------------------------------------------

    def verdicts(self, part: Dict[str, Any]) -> None:
        check = part["check"]
        ranks = check["ranks"]
        valid = sum(1 for r in ranks if r["verdict"] == "valid")
        word = "ok" if part["exit_code"] == 0 else "bad"
        self.parts.append(
            f"<p><span class={word}>{valid} of {len(ranks)} rank(s) valid</span>"
            + (f" · {len(check['unranked'])} capture(s) of unknown rank"
               if check.get("unranked") else "")
            + f" · check's exit code {part['exit_code']}"
            + (f" · run {e(check['run'])}" if check.get("run") else "") + "</p>")
        groups: Dict[tuple, List[int]] = {}
        for rank in ranks:
            backends = ", ".join(sorted({r["backend"] for r in rank["runs"]})) or "-"
            groups.setdefault((rank["verdict"], backends), []).append(rank["rank"])
        rows = [f"<tr><td class={'ok' if verdict == 'valid' else 'bad'}>{e(verdict)}</td>"
                f"<td>{e(backends)}</td><td class=n>{len(found)}</td>"
                f"<td>{e(rank_ranges(found), 2 * MAX_TEXT)}</td></tr>"
                for (verdict, backends), found in sorted(groups.items())]
        self.parts.append(table(["VERDICT", "BACKEND", "RANKS", "WHICH"], rows, "verdicts"))
        bad = [r for r in ranks if r["verdict"] != "valid"]
        rows = []
        for rank in bad[:MAX_LISTED]:
            detail = (rank["problems"] or [p for run in rank["runs"] for p in run["problems"]]
                      or rank["notes"] or [""])[0]
            rows.append(f"<tr><td class=n>{rank['rank']}</td><td class=bad>"
                        f"{e(rank['verdict'])}</td><td>{e(detail)}</td></tr>")
        if rows:
            self.parts.append(table(["RANK", "VERDICT", "WHY"], rows, "bad-ranks"))
        if len(bad) > MAX_LISTED:
            self.note(f"{len(bad) - MAX_LISTED} more rank(s) not valid: `mindspeed-prof check "
                      f"--json` lists every one.")
        for warning in check.get("warnings", [])[:MAX_LISTED]:
            self.note("warning: " + warning)

    def per_step_table(self, rows: List[Dict[str, Any]], unit: str) -> None:
        if not rows:
            self.note(f"no {unit} recorded.")
            return
        keys = [k for k in PARTS if any(k in r["mean_us"] for r in rows)]
        body = [f"<tr class='{'slow' if r.get('slow_step') else ''}'>"
                f"<td class=n>{r['step']}</td><td>{e(r['backend'] or '-')}</td>"
                f"<td class=n>{r['ranks']}</td>"
                + "".join(us_cell(r["mean_us"].get(k)) for k in keys)
                + us_cell(r["max_step_time_us"]) + num_cell(r["slowest_rank"])
                + f"<td>{e(_slow_step(r.get('slow_step')))}</td></tr>"
                for r in rows[:MAX_ROWS]]
        self.parts.append(table([unit.upper(), "BACKEND", "RANKS",
                                 *[f"{SHORT[k]} (ms, mean)" for k in keys],
                                 "SLOWEST (ms)", "SLOWEST RANK", "SLOW STEP"], body,
                                "per-step"))
        if any(r.get("slowest_by") == "waits" for r in rows):
            self.note("SLOWEST RANK: the rank the others waited for most in that step "
                      "(collectives matched across ranks); in a synchronous job every rank's "
                      "step time is the same.")

    def requests(self, ranks: List[Dict[str, Any]]) -> None:
        rows = [f"<tr><td class=n>{rank['rank']}</td><td class=n>{row['request']}</td>"
                f"{us_cell(row['latency_us'])}{num_cell(row['forwards'])}"
                f"{num_cell(row['prefill'])}{num_cell(row['decode'])}"
                f"<td>{e(', '.join(row['top_ops']))}"
                f"{' (whole capture)' if row['top_ops_of'] == 'capture' else ''}</td></tr>"
                for rank in ranks for row in rank["requests"]]
        self.parts.append(table(["RANK", "REQUEST", "LATENCY (ms)", "FORWARDS", "PREFILL",
                                 "DECODE", "TOP OPERATORS"], rows[:MAX_ROWS], "requests"))

    def waits(self, waits: Optional[Dict[str, Any]], unit: str) -> None:
        """Who makes whom wait: the ranks by others' wait, the groups, the lateness map."""
        from . import figures
        from . import waits as waiting

        if not waits:
            self.note("no collective matched across two ranks or more (NPU captures, one rank, "
                      "or traces without collectives): nothing to say of waits.")
            return
        self.parts.append(f"<p>{waits['collectives']} collective(s) matched across ranks in "
                          f"{len(waits['steps'])} {e(unit)}(s); the others waited "
                          f"{waits['total_wait_us'] / 1000.0:.3f} ms in all. "
                          + ("; ".join(e(s["line"]) for s in waits["slow_ranks"][:8])
                             or "No rank made the others wait "
                                f"{waits['slow_wait_pct']:g} % of the median step time or "
                                "more per step.") + "</p>")
        rows = []
        for r in waiting.ranks_by_wait(waits):
            why = r.get("reason") or ("cause not in the breakdown" if r["slow"] else "-")
            rows.append(f"<tr class='{'slow' if r['slow'] else ''}'><td class=n>{r['rank']}</td>"
                        f"<td>{e(r.get('place') or '-')}</td>"
                        f"<td class=n>{r['arrived_last']}</td>{us_cell(r['made_wait_us'])}"
                        f"{us_cell(r['delay_per_step_us'])}{us_cell(r['own_wait_us'])}"
                        f"<td>{e(r.get('group') or '-')}</td><td>{e(why)}</td></tr>")
        if rows:
            self.parts.append(table(["RANK", "PLACE", "ARRIVED LAST", "OTHERS WAITED (ms)",
                                     "PER MEMBER PER STEP (ms)", "OWN WAIT (ms)", "GROUP",
                                     "REASON"], rows, "waits-ranks"))
        rows = []
        for g in waits["groups"][:MAX_LISTED]:
            mib = "-" if g["bytes"] is None else format(g["bytes"] / (1 << 20), ".2f")
            speed = "-" if g["bandwidth_gbps"] is None else format(g["bandwidth_gbps"], ".3f")
            link = "-" if not g["slow_link"] else "slow link: transfers " + ", ".join(
                f"{s['transfer_us'] / 1000:.3f} ms vs {s['peers_us'] / 1000:.3f} ms"
                for s in g["slow_link"][:3]) + " in other groups"
            rows.append(f"<tr><td>{e(g['group'])}</td><td>{e(g['kind'])}</td>"
                        f"<td class=n>{g['count']}</td><td class=n>{g['members']}</td>"
                        f"{us_cell(g['wait_us'])}{us_cell(g['transfer_us'])}"
                        f"<td class=n>{mib}</td><td class=n>{speed}</td>"
                        f"<td class={'bad' if g['slow_link'] else ''}>{e(link)}</td></tr>")
        self.parts.append(table(["GROUP", "KIND", "COLLECTIVES", "MEMBERS", "WAIT (ms)",
                                 "TRANSFER (ms)", "MiB", "GB/s", "LINK"], rows, "waits-groups"))
        clocks = waits["clocks"]
        off = {r: v for r, v in clocks["offsets_us"].items() if v}
        self.note(f"clocks {clocks['clocks']}, aligned on collective ends (members leave a "
                  f"collective together; tolerance {clocks['tolerance_us'] / 1000:g} ms): "
                  + (f"{len(off)} rank(s) moved, by up to "
                     f"{max(abs(v) for v in off.values()) / 1e6:.6f} s of clock error, "
                     f"uncertain by up to "
                     f"{max(clocks['uncertainty_us'].values(), default=0.0):.3f} µs"
                     if off else "no clock moved")
                  + "; lateness between ranks is skew, never absorbed into an offset.")
        matrix = waiting.lateness_matrix(waits)
        if matrix:
            if matrix["banded_rows"]:
                self.note(f"{len(waits['lateness']['ranks'])} ranks in {len(matrix['y'])} bands "
                          "in the layout's order (PP stage, then TP, then DP): each cell is the "
                          "band's latest rank.")
            if matrix["scale"]["zero"]:
                self.note("lateness at arrival: every rank arrived with the first in every "
                          f"{unit} (all zero).")
            self.figure(figures.heatmap(matrix, {"title": "Lateness at arrival (ms)",
                                                 "z_ms": matrix["z_ms"], "text": matrix["text"],
                                                 "scale": matrix["scale"]}, unit, tall=True),
                        "heatmap")

    def slow_ranks(self, slow: Dict[str, Any]) -> None:
        if not slow["of"] or (slow["of"] < 2):
            self.note("fewer than two ranks with step times: no rank to compare.")
            return
        rule = ("the ranks others wait for in collectives, steadily" if slow["by_waits"]
                else "5% or more over the median step time")
        if not slow["rows"]:
            self.parts.append(f"<p>No slow rank among {slow['of']} rank(s) "
                              f"(slow: {e(rule)}).</p>")
            return
        self.parts.append(f"<p>{slow['slow']} of {slow['of']} rank(s) slow: {e(rule)}"
                          + (f"; the first {slow['shown']}:" if slow["shown"] < slow["slow"]
                             else ":") + "</p>")
        rows = []
        for row in slow["rows"]:
            rows.append(f"<tr class=slow><td class=n>{row['rank']}</td>"
                        f"<td>{e(row.get('place') or '-')}</td>"
                        + (f"<td>{e(row.get('backend') or '')}</td>" if slow["mixed"] else "")
                        + (f"<td>{e(row['group'])} {e(row['kind'])}</td>"
                           f"{us_cell(row['made_wait_us'])}"
                           f"<td class=n>{row['group_share_pct']:.0f}%</td>"
                           if slow["by_waits"] else "")
                        + f"<td>{e(_why(row))}</td>{us_cell(row['step_time_us'])}"
                        f"<td class=n data-us='{row['deviation_us']!r}'>"
                        f"{row['deviation_us'] / 1000.0:+.3f} ({row['deviation_pct']:+.1f}%)</td>"
                        "</tr>")
        self.parts.append(table(["RANK", "PLACE", *(["BACKEND"] if slow["mixed"] else []),
                                 *(["GROUP", "OTHERS WAITED (ms)", "SHARE OF GROUP'S WAIT"]
                                   if slow["by_waits"] else []),
                                 "REASON", "STEP TIME (ms)", "VS MEDIAN (ms)"],
                                rows, "slow-ranks"))

    def rank_table(self, ranks: List[Dict[str, Any]]) -> None:
        keys = [k for k in PARTS if any(k in r["breakdown_us"] for r in ranks)]
        if not keys:
            self.note("no rank has step times.")
            return
        rows = [f"<tr><td class=n>{r['rank']}</td><td>{e(r['backend'] or '-')}</td>"
                f"<td class=n>{len(r['steps'])}</td>"
                + "".join(us_cell(r["breakdown_us"].get(k)) for k in keys) + "</tr>"
                for r in ranks[:MAX_ROWS]]
        self.parts.append(
            f"<details{' open' if len(ranks) <= 64 else ''}><summary>{len(ranks)} rank row(s)"
            f"</summary>" + table(["RANK", "BACKEND", "STEPS",
                                   *[f"{SHORT[k]} (ms)" for k in keys]], rows, "ranks")
            + "</details>")
        if len(ranks) > MAX_ROWS:
            self.note(f"{len(ranks) - MAX_ROWS} more rank rows: `mindspeed-prof summary "
                      f"--json` has every one.")

    def tops(self, summary: Dict[str, Any]) -> None:
        shown = False
        for key, what in (("top_kernels", "Kernels"), ("op_types", "Op types"),
                          ("top_ops", "Torch operators by self time")):
            items = summary["overall"][key]
            if not items:
                continue
            shown = True
            rows = [f"<tr><td>{e(i['name'], 120)}</td><td>{e(i['type'] or '')}</td>"
                    f"{us_cell(i['total_us'])}<td class=n>{i['count']}</td>"
                    f"{us_cell(i['mean_us'])}<td class=n>{i['share_pct']:.1f}%</td></tr>"
                    for i in items]
            self.parts.append(f"<h3>{what} (top {summary['top']})</h3>" + table(
                ["NAME", "TYPE", "TOTAL (ms)", "COUNT", "MEAN (ms)", "SHARE"], rows, key))
        if not shown:
            self.note("no operator or kernel times in these files.")

    def communication(self, comm: Dict[str, Any]) -> None:
        if not comm["rows"]:
            self.note("no collective found in these files.")
        else:
            rows = [f"<tr><td>{e(r['group'], 80)}</td><td>{e(r['kind'])}</td>"
                    f"<td class=n>{r['ranks']}</td><td class=n>{r['count']}</td>"
                    f"<td class=n>{_bytes(r['bytes'])}</td>{us_cell(r['time_us'])}"
                    f"{num_cell(r['bandwidth_gb_s'], '.2f')}</tr>"
                    for r in comm["rows"][:MAX_LISTED]]
            self.parts.append(table(["GROUP", "COLLECTIVE", "RANKS", "COUNT", "BYTES",
                                     "TIME (ms, all ranks)", "BANDWIDTH (GB/s)"], rows,
                                    "communication"))
            self.note("read from: " + ", ".join(comm["sources"]) + "; bytes and bandwidth "
                      "only where the files give sizes (a CPU gloo trace does not).")
        for note in comm["notes"][:MAX_LISTED]:
            self.note(note)

    def links(self, matrix: Optional[Dict[str, Any]]) -> None:
        """The rank-pair matrix of communication_matrix.json and its slow links."""
        if not matrix:
            return
        self.parts.append("<h3>Links (communication_matrix.json)</h3>")
        self.note(f"basis: {matrix['basis']}.")
        for note in matrix["notes"][:MAX_LISTED]:
            self.note(note)
        if matrix["slow_links"]:
            rows = [f"<tr><td>{e(s['group'], 80)}</td><td class=n>{s['src']} → {s['dst']}"
                    + (f" (rank {s['src_rank']} → {s['dst_rank']})"
                       if s["src_rank"] is not None and s["dst_rank"] is not None else "")
                    + "</td>"
                    f"<td>{e(s['transport'])}</td><td>{e(s['size_class'])}</td>"
                    f"{num_cell(s['bandwidth_gbps'], '.2f')}"
                    f"{num_cell(s['peers_median_gbps'], '.2f')}"
                    f"<td class=n>{s['peers']}</td></tr>" for s in matrix["slow_links"]]
            self.parts.append(table(["GROUP", "LINK", "TRANSPORT", "SIZE CLASS",
                                     "BANDWIDTH (GB/s)", "PEERS' MEDIAN (GB/s)", "PEERS"],
                                    rows, "slow-links"))
            if matrix["slow_links_total"] > len(matrix["slow_links"]):
                self.note(f"{matrix['slow_links_total']} slow links: the slowest "
                          f"{len(matrix['slow_links'])} listed.")
        else:
            self.note("slow links: none (no link below "
                      f"{matrix['slow_fraction']:g} x its peers' median bandwidth).")
        for g in matrix["slow_groups"][:MAX_LISTED]:
            self.note(f"slow group: {g['group']} moves {g['transport']} transfers of "
                      f"{g['size_class']} at {g['bandwidth_gbps']:.2f} GB/s, its {g['peers']} "
                      f"peer groups' median {g['peers_median_gbps']:.2f} GB/s.")
        self.grid(link_figures.bandwidth_figures(matrix), "heatmap")

    def captures(self, captures: List[Dict[str, Any]]) -> None:
        if not captures:
            self.note("no capture was taken by an anomaly rule in this run.")
            return
        for capture in captures[:MAX_LISTED]:
            self.parts.append(f"<div class=card><b>{e(capture['dir'])}</b> · "
                              f"<span class=tag>{e(capture['rule'])}</span><br>"
                              f"{e(capture['why'], 600)}")
            sides = [s for s in (capture.get("anomalous"), capture.get("reference")) if s]
            if sides:
                keys = [k for k in PARTS if any(k in s["breakdown_us"] for s in sides)]
                rows = [f"<tr><td>{'anomalous' if i == 0 else 'reference'}</td>"
                        f"<td class=n>{s['rank']}</td>"
                        + "".join(us_cell(s["breakdown_us"].get(k)) for k in keys) + "</tr>"
                        for i, s in enumerate(sides)]
                self.parts.append(table(["", "RANK", *[f"{SHORT[k]} (ms)" for k in keys]],
                                        rows, "capture"))
            if capture.get("grew"):
                rows = [f"<tr><td>{e(g['name'], 120)}</td><td>{e(g['kind'])}</td>"
                        f"{us_cell(g['anomalous_us_per_step'])}"
                        f"{us_cell(g['reference_us_per_step'])}{us_cell(g['grew_us_per_step'])}"
                        f"</tr>" for g in capture["grew"]]
                self.parts.append(table(["GREW MOST", "KIND", "ANOMALOUS (ms/step)",
                                         "REFERENCE (ms/step)", "GREW (ms/step)"], rows))
            for note in capture.get("notes", [])[:5]:
                self.note(note)
            self.parts.append("</div>")

    def memory(self, entries: List[Dict[str, Any]]) -> None:
        if not entries:
            self.note("no allocator snapshot in these files (--profile-memory-snapshot).")
            return
        rows = []
        for entry in entries[:MAX_LISTED]:
            if entry["error"]:
                rows.append(f"<tr><td class=n>{entry['rank']}</td><td>{e(entry['file'])}</td>"
                            f"<td colspan=4>{e(entry['error'])}</td></tr>")
            for device in entry["devices"]:
                rows.append(f"<tr><td class=n>{entry['rank']}</td><td>{e(entry['file'])}</td>"
                            f"<td class=n>{device['device']}</td>"
                            f"<td class=n>{_bytes(device['peak_allocated_bytes'])}</td>"
                            f"<td class=n>{_bytes(device['peak_reserved_bytes'])}</td>"
                            f"<td class=n>{device['events']}</td></tr>")
        self.parts.append(table(["RANK", "SNAPSHOT", "DEVICE", "PEAK ALLOCATED",
                                 "PEAK RESERVED", "EVENTS"], rows, "memory"))

    def notes(self, notes: List[str]) -> None:
        for note in notes[:MAX_LISTED]:
            self.note(note)
        if len(notes) > MAX_LISTED:
            self.note(f"... {len(notes) - MAX_LISTED} more (`mindspeed-prof summary DIR`).")

    def roles(self, data: Dict[str, Any]) -> None:
        self.section("RL steps per role", "Which role holds each RL step? Its slowest rank's "
                     "time per role (summary's cross-role table).")
        rows = []
        for step in data["roles"]["rl_steps"]:
            for row in step["roles"]:
                stages = ", ".join(f"{e(k)} {v / 1000.0:.3f}"
                                   for k, v in sorted(row["stages_us"].items()))
                rows.append(f"<tr><td class=n>{step['step']}</td><td>{e(row['role'])}</td>"
                            f"<td class=n>{len(row['ranks'])}</td>{us_cell(row['step_us'])}"
                            f"<td class=n>{row['slowest_rank']}</td><td>{stages}</td></tr>")
        self.parts.append(table(["RL STEP", "ROLE", "RANKS", "STEP (ms, slowest rank)",
                                 "SLOWEST RANK", "STAGES (ms)"], rows[:MAX_ROWS], "roles"))
        check = data["check"]
        bad = [r for r in check["ranks"] if r["verdict"] != "valid"]
        self.parts.append(f"<p><span class={'ok' if check['ok'] else 'bad'}>"
                          f"{len(check['ranks']) - len(bad)} of {len(check['ranks'])} (role, "
                          f"rank) valid</span></p>")

    def baseline(self, diff: Dict[str, Any]) -> None:
        self.section("Against the baseline", "What changed since the baseline run? Per step "
                     "the breakdown side by side, then the operators that changed most.")
        self.parts.append(render_diff(diff))


def _bytes(value: Optional[float]) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"
