"""The shared sidebar: every scenario input, bound to the URL."""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

import streamlit as st
from pydantic import ValidationError

from app_pages.shared.specs import Spec, build_specs, plain, scenario_dict, url_problems
from core.cli import describe_validation_error
from core.jsontext import JSONProblem, loads
from core.scenario import Scenario

MAX_CONFIG_BYTES = 256_000
CFG_PARAM = "cfg"


@st.cache_resource
def specs() -> dict[str, Spec]:
    return build_specs()


def encode_config(text: str) -> str:
    compact = json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(zlib.compress(compact.encode(), 9)).decode()


def inflate(token: str, limit: int) -> bytes:
    """zlib-inflate a URL token, refusing output larger than `limit` bytes
    before producing it (a tiny token can expand to gigabytes)."""
    d = zlib.decompressobj()
    raw = d.decompress(base64.urlsafe_b64decode(token.encode()), limit + 1)
    if len(raw) > limit or d.unconsumed_tail:
        raise ValueError("too large")
    return raw


def decode_config(token: str) -> str:
    return json.dumps(json.loads(inflate(token, MAX_CONFIG_BYTES)), indent=2)


def page_widget(key: str, container: Any = st) -> Any:
    """A page-level input (traffic, prices...) kept in the URL like the sidebar's."""
    return _widget(specs()[key], container)


def _store() -> dict[str, Any]:
    """Every input's current value by URL key; survives the widget being hidden."""
    return st.session_state.setdefault("_values", {})


def _widget(spec: Spec, container: Any = st) -> Any:
    """The widget for a spec under the key `spec.key` (also its URL parameter)."""
    store = _store()
    if spec.key not in st.session_state:
        st.session_state[spec.key] = store.get(spec.key, spec.default)
    common: dict[str, Any] = {"key": spec.key, "help": spec.help or None}
    if spec.kind == "bool":
        value = container.toggle(spec.label, **common)
    elif spec.kind in ("int", "float"):
        cast = int if spec.kind == "int" else float
        step = {"step": 1} if spec.kind == "int" else {}
        value = container.number_input(spec.label, min_value=cast(spec.lo), max_value=cast(spec.hi), **step, **common)
    elif spec.key in ("batch", "seq", "rank"):
        value = container.select_slider(spec.label, options=list(spec.options), format_func=spec.fmt, **common)
    elif len(spec.options) <= 3 and spec.key not in ("model", "acc", "fmt"):
        value = container.segmented_control(spec.label, options=list(spec.options), format_func=spec.fmt, required=True, **common)
    else:
        value = container.selectbox(spec.label, options=list(spec.options), format_func=spec.fmt, **common)
    store[spec.key] = value
    return value


def _load_url_once(sp: dict[str, Spec]) -> list[str]:
    """At a session's first run, take the scenario from the URL; say what was ignored."""
    if st.session_state.get("_url_loaded"):
        return []
    st.session_state["_url_loaded"] = True
    query = {k: st.query_params[k] for k in st.query_params}
    store = _store()
    for key, raw in query.items():
        if key in sp:
            try:
                store[key] = sp[key].parse(raw)
            except (ValueError, OverflowError):
                pass
    return url_problems(query, sp)


def _sync_url(sp: dict[str, Spec]) -> None:
    """Write every non-default input to the URL (ids, not labels)."""
    store = _store()
    for key, spec in sp.items():
        value = store.get(key, spec.default)
        if value == spec.default:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != str(value):
            st.query_params[key] = str(value)


def _config_input() -> tuple[dict | None, str | None]:
    """The pasted or uploaded config.json, kept in the URL (compressed)."""
    if "cfg_text" not in st.session_state:
        token = st.query_params.get(CFG_PARAM)
        text = ""
        if token:
            try:
                text = decode_config(token)
            except (ValueError, RecursionError, binascii.Error, zlib.error, UnicodeDecodeError):
                st.session_state["cfg_url_error"] = "The config.json in the link could not be read and was ignored."
        st.session_state["cfg_text"] = text
    upload = st.file_uploader("Upload config.json", type=["json"], key="cfg_upload", max_upload_size=1)
    if upload is not None and st.session_state.get("cfg_upload_id") != upload.file_id:
        st.session_state["cfg_upload_id"] = upload.file_id
        data = upload.getvalue()
        if len(data) > MAX_CONFIG_BYTES:
            st.error(f"That file is {len(data) / 1e6:.1f} MB; a config.json is a few kB. Nothing was changed.")
        else:
            try:
                st.session_state["cfg_text"] = data.decode("utf-8")
            except UnicodeDecodeError:
                st.error("That file is not UTF-8 text. Nothing was changed.")
    text = st.text_area(
        "...or paste config.json", key="cfg_text", height=160, max_chars=MAX_CONFIG_BYTES, placeholder='{"model_type": "llama", "hidden_size": 4096, ...}'
    )
    if err := st.session_state.pop("cfg_url_error", None):
        st.warning(err)
    if not text.strip():
        return None, "Paste or upload a config.json to size a model that is not in the catalog."
    try:
        cfg = loads(text)
    except JSONProblem as exc:
        return None, f"config.json {exc}."
    if not isinstance(cfg, dict):
        return None, "config.json must be a JSON object ({...})."
    try:
        token = encode_config(text)
        if len(token) < 6000:
            st.query_params[CFG_PARAM] = token
    except (ValueError, TypeError):
        pass
    return cfg, None


def render_sidebar() -> tuple[Scenario | None, dict[str, Any], list[str]]:
    """Draw the inputs; return the scenario (None when invalid), the widget
    values and the messages to show on the page."""
    sp = specs()
    messages = _load_url_once(sp)
    _apply_pending_upload(sp)
    sb = st.sidebar
    with sb:
        st.subheader("Model")
        src = _widget(sp["src"])
        model: Any = None
        model_error = None
        if src == "preset":
            model = _widget(sp["model"])
        elif src == "params":
            model = {"params": _widget(sp["params"]) * 1e9}
        else:
            cfg, model_error = _config_input()
            model = {"hf_config": cfg} if cfg is not None else None
        if src != "config" and CFG_PARAM in st.query_params:
            del st.query_params[CFG_PARAM]
        st.subheader("Workload")
        mode = _widget(sp["mode"])
        _widget(sp["acc"])
        values: dict[str, Any] = {"src": src, "mode": mode}
        for key in ("batch", "seq"):
            values[key] = _widget(sp[key])
        if mode == "training":
            values["method"] = _widget(sp["method"])
            if values["method"] == "lora":
                values["fmt"] = _widget(sp["fmt"])
            for key in ("opt", "prec", "gc", "flash"):
                values[key] = _widget(sp[key])
            if values["method"] != "full":
                values["rank"] = _widget(sp["rank"])
                values["targets"] = _widget(sp["targets"])
            with st.expander("Sharding and parallelism", expanded=False):
                for key in ("zero", "offload", "dp", "tp", "pp"):
                    values[key] = _widget(sp[key])
            with st.expander("Training run (time and cost)", expanded=False):
                for key in ("tokens", "mfu"):
                    values[key] = _widget(sp[key])
        else:
            for key in ("fmt", "kv", "flash"):
                values[key] = _widget(sp[key])
            with st.expander("Parallelism", expanded=False):
                for key in ("tp", "pp"):
                    values[key] = _widget(sp[key])
        st.subheader("Display")
        values["units"] = _widget(sp["units"])
    store = _store()
    for key, spec in sp.items():  # inputs hidden in this mode keep their values
        values.setdefault(key, store.get(key, spec.default))
    values["acc"] = store["acc"]
    _sync_url(sp)
    if model is None:
        messages.append(model_error or "Choose a model.")
        return None, values, messages
    try:
        scenario = Scenario.model_validate(scenario_dict(values, model))
    except ValidationError as exc:
        messages.append("This combination is not valid: " + describe_validation_error(exc))
        return None, values, messages
    return scenario, values, messages


def scenario_to_widgets(sc: Scenario) -> dict[str, Any]:
    """Widget values (and the config text) that reproduce a scenario."""
    out: dict[str, Any] = {
        "mode": sc.mode,
        "acc": sc.accelerator,
        "fmt": sc.weights_format,
        "method": sc.method,
        "opt": sc.optimizer,
        "prec": sc.precision,
        "gc": sc.gradient_checkpointing,
        "flash": sc.flash_attention,
        "targets": sc.lora_targets,
        "zero": sc.zero_stage,
        "offload": sc.offload,
        "dp": sc.data_parallel,
        "tp": sc.tensor_parallel,
        "pp": sc.pipeline_parallel,
        "kv": sc.kv_cache_format,
        "tokens": (sc.train_tokens or 0) / 1e9,
        "mfu": (sc.mfu or 0) * 100,
    }
    sp = specs()
    for key, value in (("batch", sc.batch_size), ("seq", sc.seq_len), ("rank", sc.lora_rank)):
        opts = sp[key].options
        out[key] = min(opts, key=lambda o, v=value: abs(o - v))  # nearest slider stop
    if isinstance(sc.model, str):
        out.update(src="preset", model=sc.model)
    elif hasattr(sc.model, "params"):
        out.update(src="params", params=sc.model.params / 1e9)
    else:
        out.update(src="config", cfg_text=json.dumps(sc.model.hf_config, indent=2))
    return out


def request_widgets(values: dict[str, Any]) -> None:
    """Ask the next run to set these widget values (before widgets exist)."""
    st.session_state["pending_widgets"] = values


def _apply_pending_upload(sp: dict[str, Spec]) -> None:
    pending = st.session_state.pop("pending_widgets", None)
    if not pending:
        return
    store = _store()
    for key, value in pending.items():
        st.session_state[key] = value
        if key in sp:
            store[key] = value


def load_scenario_json(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """Parse an uploaded scenario JSON into widget values, or say what is wrong."""
    if len(data) > 1_000_000:
        return None, f"That file is {len(data) / 1e6:.1f} MB; a scenario is a few kB. Nothing was changed."
    try:
        obj = loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return None, "That file is not UTF-8 text. Nothing was changed."
    except JSONProblem as exc:
        return None, f"That file {exc}. Nothing was changed."
    if isinstance(obj, dict) and isinstance(obj.get("scenario"), dict):
        obj = obj["scenario"]
    if not isinstance(obj, dict):
        return None, "A scenario file is a JSON object with at least a 'model'. Nothing was changed."
    try:
        sc = Scenario.model_validate(obj)
    except ValidationError as exc:
        return None, "That scenario is not valid: " + describe_validation_error(exc) + ". Nothing was changed."
    widgets = scenario_to_widgets(sc)
    sp = specs()
    off_scale = []
    for key, value in widgets.items():
        if key in sp and sp[key].kind in ("int", "float", "choice") and key not in ("batch", "seq", "rank"):
            try:
                sp[key].parse(str(value))
            except ValueError:
                off_scale.append(f"{sp[key].label} = {value}")
    if off_scale:
        return None, ("The dashboard's inputs cannot show " + "; ".join(off_scale) + ". Nothing was changed (python -m core estimate accepts the file as it is).")
    return widgets, None


def traffic_inputs(last_key: str):
    """Requests/day, tokens in and out (and one more input, `last_key`) in a
    row; the Traffic they describe, or None after saying why it is invalid."""
    from core.money.serving import Traffic

    cols = st.columns(4)
    rpd, tin, tout = (page_widget(k, c) for k, c in zip(("rpd", "tin", "tout"), cols, strict=False))
    extra = page_widget(last_key, cols[3])
    try:
        return Traffic(requests_per_day=rpd, input_tokens_per_request=tin, output_tokens_per_request=tout), extra
    except ValidationError as exc:
        st.warning(plain("This traffic is not valid: " + describe_validation_error(exc)), icon=":material/warning:")
        return None, extra
