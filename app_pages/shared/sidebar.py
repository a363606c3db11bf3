"""The sidebar's layout: the field table's sidebar inputs, section by section, shown when they apply to the current
values, each drawn by the widget factory (widgets.py, which also draws the pages' inputs) with the callback that
decides what its change reruns (rerun.py)."""

from __future__ import annotations

import json
import os

import streamlit as st

from app_pages.shared import guard
from app_pages.shared.cache import shared_cache
from app_pages.shared.fields import fields
from app_pages.shared.presenter import beside
from app_pages.shared.rerun import INPUTS, after_sidebar_change, rerun_all, sidebar_shape
from app_pages.shared.scenario_io import parse_config_text
from app_pages.shared.state import CFG_TEXT, MAX_CONFIG_CHARS, current_values
from app_pages.shared.text import md, plain
from app_pages.shared.widgets import long_choice, widget
from core.model.hf_config import ConfigError, parse_hf_config
from core.model.hub import HUB_BASE_URL, HubError, fetch_hub_model

SECTIONS = (("model", "Model"), ("workload", "Workload"), ("parallel", None), ("run", None), ("display", "Display"))


def _hub_import() -> None:
    """Type a Hugging Face repo id; its config.json lands in the paste box below (and so in the link). LLMGP_HUB_URL
    points it at a loopback recorder in tests; "off" hides it on a server without outbound access."""
    hub_url = os.environ.get("LLMGP_HUB_URL", HUB_BASE_URL)
    if hub_url == "off":
        return
    cols = st.columns([2, 1], vertical_alignment="bottom")  # at [3, 1] the button read "F…" in the sidebar
    repo = cols[0].text_input("Hugging Face model id", key="hub_repo", max_chars=200, placeholder="Qwen/Qwen3-8B")
    if cols[1].button("Fetch", key="hub_fetch", disabled=not repo.strip()):
        try:
            with guard.released():  # up to the fetch's 5 s deadline on the network: the other sessions run meanwhile
                got = fetch_hub_model(repo, base_url=hub_url)
        except HubError as exc:
            st.session_state["hub_note"] = ("warning", exc.message)
        else:
            st.session_state[CFG_TEXT] = _named(got.config_text, got.repo_id, got.config)
            count = f"; the checkpoint holds {got.params:,} parameters" + (f" ({got.dtype})" if got.dtype else "") if got.params else ""
            st.session_state["hub_note"] = ("info", f"config.json of {got.repo_id} from huggingface.co{count}.")
        st.rerun()  # the sidebar's inputs reran alone (rerun.py): the whole app takes the new config
    if note := st.session_state.get("hub_note"):
        (st.warning if note[0] == "warning" else st.caption)(plain(note[1]))


def _named(config_text: str, repo_id: str, config: dict) -> str:
    """A fetched config.json with the Hub id as its name where it names none (`_name_or_path`, which
    save_pretrained writes): the model is then called "Qwen/Qwen3-30B-A3B" on every page, not "qwen3_moe". The key
    goes in as a line of its own after the opening brace, the file otherwise as served: re-encoded with indent=2, a
    250 kB config of deeply nested empty lists became 80 MB (stop 50's hosting review)."""
    if "_name_or_path" in config or not config:
        return config_text
    opening = config_text.find("{")  # the object's own brace: `config` parsed from this text is a non-empty object
    if opening < 0:
        return config_text
    return config_text[: opening + 1] + "\n  " + json.dumps("_name_or_path") + ": " + json.dumps(repo_id) + "," + config_text[opening + 1 :]


def _si(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:,.3g}{unit}"
    return f"{n:,.0f}"


@shared_cache(max_entries=32)  # keyed on the text: weighed in the caches' ledger (app_pages/shared/cache.py)
def config_summary(text: str) -> str | None:
    """What was read from a config.json, in one line of trusted Markdown with every value from the file escaped: its
    name, total and active parameters, layers, attention (GQA, MQA, MLA, a sliding window), context and KV-cache bytes
    per token at 16 bits; None when there is nothing to read (the page says why)."""
    cfg, _ = parse_config_text(text)
    if cfg is None:
        return None
    try:
        arch = parse_hf_config(cfg)
    except (ConfigError, RecursionError):
        return None
    if arch.is_mla:
        attention = f"MLA (latent {arch.kv_lora_rank})"
    elif arch.num_kv_heads == arch.num_heads:
        attention = f"MHA ({arch.num_heads} heads)"
    elif arch.num_kv_heads == 1:
        attention = f"MQA ({arch.num_heads} heads)"
    else:
        attention = f"GQA ({arch.num_heads} heads / {arch.num_kv_heads} KV)"
    if arch.sliding_window and arch.windowed_layers:
        attention += f", sliding window {arch.sliding_window:,} on {arch.windowed_layers} of {arch.num_layers} layers"
    full, windowed = arch.kv_cache_elements_per_token()
    kv = 2 * (full + windowed)  # bytes at BF16, per token at most (windowed layers stop growing at the window)
    kv_text = f"{kv / 1024:,.4g} KiB" if kv >= 1024 else f"{kv} B"
    active = "" if arch.active_params == arch.total_params else " ({active} active)"
    return md(
        "Read: **{name}** · {total} parameters" + active + " · {layers} layers · {attention} · context {context} · KV cache {kv} per token (16-bit)",
        name=arch.name,
        total=_si(arch.total_params),
        active=_si(arch.active_params),
        layers=arch.num_layers,
        attention=attention,
        context=f"{arch.max_context:,}",
        kv=kv_text,
    )


def _config_input() -> None:
    _hub_import()
    upload = st.file_uploader("Upload config.json", type=["json"], key="cfg_upload", max_upload_size=1, on_change=rerun_all)
    if upload is not None and st.session_state.get("cfg_upload_id") != upload.file_id:
        st.session_state["cfg_upload_id"] = upload.file_id
        data = upload.getvalue()
        if len(data) > MAX_CONFIG_CHARS:
            st.error(f"That file is {len(data) / 1e6:.1f} MB; a config.json is a few kB. Nothing was changed.")
        else:
            try:
                st.session_state[CFG_TEXT] = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                st.error("That file is not UTF-8 text. Nothing was changed.")
    st.session_state.setdefault(CFG_TEXT, "")
    st.text_area(
        "...or paste config.json",
        key=CFG_TEXT,
        height=160,
        max_chars=MAX_CONFIG_CHARS,
        placeholder='{"model_type": "llama", "hidden_size": 4096, ...}',
        on_change=rerun_all,
    )
    if summary := config_summary(st.session_state[CFG_TEXT]):
        st.caption(summary)


@st.fragment(key=INPUTS)
def render_sidebar() -> None:
    """Draw every sidebar input that applies (hidden ones keep their values), where it is called (app.py: in the
    sidebar). Widget changes are in st.session_state before the run starts, so the values read once up front decide
    what shows. A fragment (rerun.py): each input's change reruns the page alone or the whole app."""
    with guard.turn():  # alone, this run skips the app's top level and its guard
        _inputs()


def _inputs() -> None:
    table = fields()
    values = current_values()
    shape = sidebar_shape(values)
    on_page = beside(values)  # the presenter view draws these beside the page's chart (presenter.py)
    st.subheader("Model")
    for f in table.values():
        if f.section == "model" and f.applies(values) and f.key not in on_page:
            _input(f, values, shape)
    if values["src"] == "config":
        _config_input()
    for section, title in SECTIONS[1:]:
        rows = [f for f in table.values() if f.section == section and f.applies(values) and f.key not in on_page]
        if not rows:
            continue
        if section == "parallel":
            container = st.expander("Sharding and parallelism" if values["mode"] == "training" else "Parallelism")
        elif section == "run":
            container = st.expander("Training run (time and cost)")
        else:
            st.subheader(title or section)
            container = st.container()
        with container:
            for f in rows:
                _input(f, values, shape)


def _input(f, values: dict, shape: tuple) -> None:
    """One sidebar input, and under a selectbox whose choice is too long for its box, the choice in full."""
    widget(f, on_change=after_sidebar_change, args=(shape,))
    if full := long_choice(f, values):
        st.caption(plain(full))
