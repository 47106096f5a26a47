"""Reading a harness file (TOML or YAML 1.2) into a validated :class:`Harness`: instruction
files materialized, paths kept inside the harness folder unless allowed, errors in one line."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from pydantic import ValidationError

from recstore.errors import InputError
from recstore.replay.harness.spec import Harness


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML with YAML 1.2 core booleans (``yes``/``on`` stay strings, as js-yaml reads them)."""


_Yaml12Loader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _read_document(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read harness file: {exc.strerror}", source=str(path)) from None
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
        else:
            raise InputError("a harness file must end in .toml, .yaml or .yml", source=str(path))
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"not valid {path.suffix[1:].upper()}: {exc}", source=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("a harness file must be a table/mapping at the top level", source=str(path))
    return data


def harness_file(base: Path, name: str, allow_outside: bool, *, source: str, where: str) -> Path:
    """``base / name`` for a file a harness names, refused when it lies outside ``base`` (the
    harness's folder; symbolic links resolved) unless ``allow_outside``: the file's text goes
    into the stored replay record, so a harness must not read ``../../../../etc/passwd``."""
    path = base / name
    if allow_outside or path.resolve().is_relative_to(base.resolve()):
        return path
    raise InputError(
        f"{name!r} is outside the harness's folder {base.resolve()}; a harness reads only files "
        "beside it (to allow it: `allow_outside`, or allow_outside = true under a sweep "
        "spec's [candidate])", source=source, path=where)


def _materialize(data: dict, base: Path, source: str, allow_outside: bool) -> dict:
    """Replace each agent's ``instructions_file`` by ``instructions`` (the file's text)."""
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return data
    out = dict(data)
    out["agents"] = {}
    for agent_id, spec in agents.items():
        if isinstance(spec, dict) and "instructions_file" in spec:
            spec = dict(spec)
            name = spec.pop("instructions_file")
            if "instructions" in spec:
                raise InputError("give instructions or instructions_file, not both", source=source, path=f"agents.{agent_id}")
            path = harness_file(base, str(name), allow_outside, source=source,
                                where=f"agents.{agent_id}.instructions_file")
            try:
                spec["instructions"] = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot read instructions_file {name!r}: {exc.strerror}", source=source, path=f"agents.{agent_id}") from None
        out["agents"][agent_id] = spec
    return out


def _validation_message(exc: ValidationError) -> tuple[str, str | None]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    return message, where


def parse_harness(data: dict, *, source: str = "harness", base: Path | None = None,
                  allow_outside: bool = False) -> Harness:
    """Validate a harness document (a dict as read from TOML/YAML). Files it names
    (``instructions_file``, ``provider.script``) must lie in ``base`` (default: the current
    folder) unless ``allow_outside``."""
    materialized = _materialize(data, base or Path("."), source, allow_outside)
    try:
        harness = Harness.model_validate(materialized)
    except ValidationError as exc:
        message, where = _validation_message(exc)
        raise InputError(message, source=source, path=where) from None
    harness._document = materialized
    if harness.provider.kind == "scripted" and isinstance(harness.provider.script, str) and base is not None:
        script = harness_file(base, harness.provider.script, allow_outside, source=source,
                              where="provider.script").resolve()
        harness = harness.model_copy(update={"provider": harness.provider.model_copy(update={"script": str(script)})})
    return harness


def load_harness(path: str | Path, *, allow_outside: bool = False) -> Harness:
    """Read, materialize and validate a harness file; errors name the file and the field.

    A harness file is trusted like code: it may name Python functions to import and run
    (``tools.*.implementation``) and a ``base_url`` that receives its API key variable. What it
    may not do by accident is read files outside its own folder (unless ``allow_outside``) or
    send an environment variable that is not an API key (``provider.api_key_env`` must be
    ``NAME_API_KEY``)."""
    path = Path(path)
    return parse_harness(_read_document(path), source=str(path), base=path.parent,
                         allow_outside=allow_outside)
