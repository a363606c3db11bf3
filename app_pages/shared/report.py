"""Results as CSV and a one-page Markdown report a manager can forward. Every
text that can come from the user (a model name, a config's fields) is escaped
the same way as on the pages (app_pages/shared/text.py)."""

from __future__ import annotations

import io
from datetime import date

import pandas as pd
import streamlit as st

from app_pages.shared.charts import capacity_phrase, component_label, layout_text
from app_pages.shared.memory_views import help_basis, help_rows
from app_pages.shared.style import Units
from app_pages.shared.text import plain, say, spreadsheet_safe
from core.estimate import Result
from core.memory.explain import explain
from core.scenario import Scenario


def results_csv(sc: Scenario, result: Result, units: Units) -> str:
    m = result.memory_per_device_bytes
    rows = [{"component": component_label(k, [result.accelerator]), "bytes": v, units.name: round(units.value(v), 3)} for k, v in m.model_dump().items() if k != "total"]
    rows.append({"component": "Total", "bytes": m.total, units.name: round(units.value(m.total), 3)})
    buf = io.StringIO()
    pd.DataFrame(rows).to_csv(buf, index=False)
    extra = {
        "accelerator": result.accelerator,
        "fits": result.fits,
        "devices_needed": result.devices_needed,
        "max_batch_size": result.max_batch_size,
        "max_seq_len": result.max_seq_len,
        "params_total": result.params.total,
        "params_active": result.params.active,
        "params_trainable": result.params.trainable,
        "kv_cache_bytes_per_token": result.kv_cache_bytes_per_token,
    }
    for key, value in extra.items():
        buf.write(f"{key},{spreadsheet_safe(value)},\n")  # an accelerator typed in: never a formula
    return buf.getvalue()


def report_markdown(sc: Scenario, result: Result, units: Units, extra_sections: list[str] | None = None) -> str:
    """The report. `extra_sections` are Markdown the pages composed (their dynamic parts escaped with plain())."""
    m = result.memory_per_device_bytes
    arch = sc.architecture
    workload = f"training / fine-tuning ({sc.method})" if sc.mode == "training" else "serving (inference)"
    lines = [
        f"# LLM GPU Planner report — {plain(arch.name)}",
        "",
        f"*{date.today().isoformat()}; every number below comes from `python -m core estimate` on the scenario at the end.*",
        "",
        "## Answer",
        "",
        f"- **Workload:** {workload} on **{plain(result.accelerator)}**, batch {sc.batch_size}, {sc.seq_len:,} tokens.",
        f"- **Memory per device:** {plain(units(m.total))} of {plain(capacity_phrase(result, units))} — **{'fits' if result.fits else 'does not fit'}**.",
        f"- **Smallest layout that fits:** {plain(layout_text(result.layout_needed))}.",
        f"- **Largest batch / longest context that fit:** {result.max_batch_size:,} / {result.max_seq_len:,} tokens.",
        "",
        "## Memory per device",
        "",
        f"| Component | {units.name} | Formula | Source |",
        "|---|---:|---|---|",
    ]
    for p in explain(sc, result):
        lines.append(f"| {component_label(p.component, [result.accelerator])} | {units.value(p.bytes):,.2f} | {say(p.numbers, units.name)} | {plain(p.source)} |")
    lines.append(f"| **Total** | **{units.value(m.total):,.2f}** | | |")
    if result.advice_texts:
        lines += ["", "## What would help", ""] + [f"- {say(a, units.name)}" for a in result.advice_texts]
    if result.help_options:
        rows = help_rows(result.help_options, sc, units)
        lines += ["", "Each change that makes it fit, with its time and cost:", "", "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(plain(v) for v in row.values()) + " |" for row in rows]
        lines += ["", plain(help_basis(sc, result.help_options))]
    for section in extra_sections or []:
        lines += ["", section]
    lines += ["", "## Assumptions", ""] + [f"- {say(a, units.name)}" for a in result.assumption_texts]
    lines += [
        "",
        "## Scenario (re-upload it in the app, or run `python -m core estimate`)",
        "",
        "```json",
        sc.model_dump_json(exclude_defaults=True, indent=2).replace("`", "'"),
        "```",
        "",
    ]
    return "\n".join(lines)


def report_downloads(sc: Scenario, result: Result, units: Units, extra_sections: list[str] | None = None) -> None:
    c1, c2 = st.columns(2)
    c1.download_button(
        "Results (CSV)",
        data=lambda: results_csv(sc, result, units),
        file_name="llm-gpu-planner-results.csv",
        mime="text/csv",
        icon=":material/table:",
        width="stretch",
        on_click="ignore",  # a run on click would draw the button again and let a sweep drop the callable clicked (app.py, issue #28)
    )
    c2.download_button(
        "One-page report (Markdown)",
        data=lambda: report_markdown(sc, result, units, extra_sections),
        file_name="llm-gpu-planner-report.md",
        mime="text/markdown",
        icon=":material/description:",
        width="stretch",
        on_click="ignore",
    )
