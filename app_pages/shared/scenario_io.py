"""Inputs <-> Scenario, as loops over the field table: the scenario the
widgets describe, the widget values that reproduce a scenario (an upload, a
workshop preset, a plan), and scenario files in and out."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import streamlit as st
from pydantic import ValidationError

from app_pages.shared.blobs import Blob
from app_pages.shared.cache import shared_cache
from app_pages.shared.field import CUSTOM_ACC, Values, custom_hardware
from app_pages.shared.fields import fields
from app_pages.shared.state import CFG_TEXT, MAX_CONFIG_CHARS, config_blob
from core.catalog.accelerators import custom_accelerator, custom_accelerator_id
from core.cli import describe_validation_error
from core.engine_fallback import with_runnable_engine
from core.jsontext import MAX_CONFIG_DEPTH, JSONProblem, loads
from core.model.hf_config import ConfigError, parse_hf_config
from core.scenario import HFConfig, Scenario

NO_CONFIG = "Paste or upload a config.json to size a model that is not in the catalog."


@shared_cache(max_entries=64, data=True)
def parse_config_text(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(config dict, None) or (None, the problem). Shared by all sessions, bounded: the same pasted or linked
    config is parsed once."""
    if not text.strip():
        return None, NO_CONFIG
    if len(text) > MAX_CONFIG_CHARS:
        return None, f"That config.json is {len(text):,} characters; a config.json is a few thousand. Nothing was sized."
    try:
        cfg = loads(text, max_depth=MAX_CONFIG_DEPTH)  # deeper would not pickle into this cache (RecursionError)
    except JSONProblem as exc:
        return None, f"config.json {exc}."
    if not isinstance(cfg, dict):
        return None, "config.json must be a JSON object ({...})."
    try:
        parse_hf_config(cfg)
    except (ConfigError, RecursionError) as exc:
        return None, str(exc) if isinstance(exc, ConfigError) else "config.json is nested too deeply."
    return cfg, None


def model_spec(values: Values, config_text: str) -> tuple[Any, str | None]:
    """The Scenario's `model` for the inputs: a preset id, {"params": n} or {"hf_config": {...}}."""
    src = values.get("src", "preset")
    if src == "preset":
        return values["model"], None
    if src == "params":
        return {"params": values["params"] * 1e9}, None
    cfg, problem = parse_config_text(config_text)
    return ({"hf_config": cfg} if cfg is not None else None), problem


def scenario_dict(values: Values, model: Any) -> dict[str, Any]:
    """The Scenario fields the inputs set: every field that applies to these values, through its scale."""
    out: dict[str, Any] = {"model": model}
    for f in fields().values():
        if f.scenario and f.applies(values):
            value = f.to_scenario(values[f.key])  # hop: a widget's value -> the Scenario field's units (Field.scale)
            if value is not None:
                out[f.scenario] = value
    if custom_hardware(values):  # "Any hardware I own": the id carries what was typed
        out["accelerator"] = custom_accelerator_id(values["cmem"], values["cbw"], values["ctf"])
    return out


def build_scenario(values: Values, config_text: str) -> tuple[Scenario | None, str | None]:
    model, problem = model_spec(values, config_text)
    if model is None:
        return None, problem or "Choose a model."
    refused = {f.key: why for f in fields().values() if f.scenario and f.applies(values) and (why := f.refused(values[f.key])) is not None}
    if refused:  # a number the input takes but the scenario does not (a step budget of 1-15 tokens): left unset, said once
        values = {**values, **{key: 0 for key in refused}}
    d = scenario_dict(values, model)
    try:
        sc = Scenario.model_validate(d)  # hop: field dict -> validated Scenario
        return sc, " ".join(refused.values()) or None
    except ValidationError as exc:
        if (instead := with_runnable_engine(d)) is not None:  # an engine the part does not run: shown with one it does
            return instead[0], " ".join([*refused.values(), instead[1]])
        return None, "This combination is not valid: " + describe_validation_error(exc, names=input_labels())


def input_labels() -> dict[str, str]:
    """Scenario field -> the label of the input that sets it (a message names what the reader sees)."""
    out: dict[str, str] = {}
    for f in fields().values():
        if f.scenario and not f.others_as_default:  # a shared scenario field is named by its main input
            out.setdefault(f.scenario, f.label)
    return out


def scenario_values(sc: Scenario) -> Values:
    """Input values (and the config text) that reproduce a scenario."""
    out: Values = {}
    for f in fields().values():
        if f.scenario:
            out[f.key] = f.from_scenario(getattr(sc, f.scenario))
    if (custom := custom_accelerator(sc.accelerator)) is not None:
        out.update(acc=CUSTOM_ACC, cmem=custom.memory_gib, cbw=custom.memory_bandwidth_gbps, ctf=custom.bf16_tflops)
    if isinstance(sc.model, str):
        out.update(src="preset", model=sc.model)
    elif hasattr(sc.model, "params"):
        out.update(src="params", params=sc.model.params / 1e9)
    else:
        out.update(src="config")
        out[CFG_TEXT] = json.dumps(sc.model.hf_config, indent=2, ensure_ascii=False)  # as written: é stays one character
    return out


def unshowable(sc: Scenario, values: Values) -> list[str]:
    """What the widgets cannot show exactly: a number outside a widget's range, a choice it does not offer, or a value
    between a slider's stops (batch 3 would show as 2: a scenario is refused rather than changed without a word)."""
    out = []
    for key, value in values.items():
        f = fields().get(key)
        if f is None:
            continue
        try:
            f.parse(f.serialize(value))
        except ValueError:
            out.append(f"{f.label} = {f.scenario_text(getattr(sc, f.scenario)) if f.scenario else value}")
            continue
        if f.scenario and f.applies(values) and not f.shows(getattr(sc, f.scenario), value):
            out.append(f"{f.label} = {f.scenario_text(getattr(sc, f.scenario))} (the input has {f.fmt(value)} nearest)")
    return out


def scenario_file(sc: Scenario) -> str:
    return json.dumps({"scenario": sc.model_dump(mode="json", exclude_defaults=True)}, indent=2)


LATEST = "_latest_scenario"  # {"latest": (fields, model, problem)}, kept up to date by the page (remember_scenario)


def remember_scenario(sc: Scenario | None, problem: str | None) -> None:
    """Note the scenario the page was drawn for, for the sidebar's download (scenario_download), in a small form (issue
    #25): its fields as the file writes them, and a pasted config.json as the deflated blob of the text it was parsed
    from (state.config_blob: the one the session keeps for its link, stored once for every session on the same text),
    not the parsed config (about 80 kB in the session for a config.json at the link's budget; bench/session_state.py).
    One assignment, so that a click served on another thread reads one run's note whole."""
    if sc is None:
        note = (None, None, problem)
    else:
        fields_json = sc.model_dump(mode="json", exclude_defaults=True, exclude={"model"})  # model is the first field
        model: Any = sc.model
        if isinstance(model, HFConfig):  # parsed from the text area (app.py's body: build_scenario)
            model = {"hf_config": config_blob(st.session_state.get(CFG_TEXT, "")), **model.model_dump(mode="json", exclude_defaults=True, exclude={"hf_config"})}
        elif not isinstance(model, str):
            model = model.model_dump(mode="json", exclude_defaults=True)
        note = (fields_json, model, problem)
    st.session_state.setdefault(LATEST, {})["latest"] = note


def scenario_download() -> Callable[[], str]:
    """The sidebar's download, built when clicked from the scenario the page last drew: the page may have rerun on
    its own since the sidebar was drawn. Streamlit runs the callable outside the session's script thread, where
    st.session_state cannot be read, so it keeps the session's own holder (a dict the page updates in place)."""
    holder = st.session_state.setdefault(LATEST, {})

    def build() -> str:
        fields_json, model, problem = holder.get("latest", (None, None, None))
        if fields_json is None:
            return json.dumps({"error": problem or "no scenario yet"}, indent=2)
        if isinstance(model, dict) and isinstance(blob := model.get("hf_config"), Blob):
            model = {**model, "hf_config": loads(blob.text())}  # the text the page's scenario was parsed from
        return scenario_file(Scenario.model_validate({"model": model, **fields_json}))  # valid: it was, as these fields

    return build


def load_scenario_json(data: bytes) -> tuple[Values | None, str | None]:
    """An uploaded scenario file as input values, or what is wrong with it (nothing is changed then)."""
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
    except (ValueError, TypeError, RecursionError) as exc:
        return None, f"That scenario is not valid: {str(exc)[:200]}. Nothing was changed."
    config = getattr(sc.model, "hf_config", None)
    if config is not None and len(json.dumps(config, ensure_ascii=False)) > MAX_CONFIG_CHARS:  # before indenting it
        return None, f"That scenario's config.json is over {MAX_CONFIG_CHARS:,} characters; the config box holds {MAX_CONFIG_CHARS:,}. Nothing was changed."
    values = scenario_values(sc)
    if off := unshowable(sc, values):
        return None, ("The dashboard's inputs cannot show " + "; ".join(off) + ". Nothing was changed (python -m core estimate accepts the file as it is).")
    if len(values.get(CFG_TEXT, "")) > MAX_CONFIG_CHARS:  # the size that stays in the session, after re-encoding
        return None, f"That scenario's config.json is {len(values[CFG_TEXT]):,} characters as text; the config box holds {MAX_CONFIG_CHARS:,}. Nothing was changed."
    return values, None


@shared_cache(max_entries=256, data=True)
def saved_scenario(text: str) -> Scenario | None:
    """A saved (Compare) scenario from its JSON text; None when it is not valid."""
    try:
        return Scenario.model_validate(loads(text))
    except (ValidationError, JSONProblem, ValueError, TypeError, RecursionError):
        return None
