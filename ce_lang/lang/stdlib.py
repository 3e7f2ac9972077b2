"""Loading criteria definitions: the standard library and the user's own `.ce` files."""

from __future__ import annotations

import hashlib
import os
from functools import cache
from typing import Any

from ce_lang import hostfs
from ce_lang.diagnostics import Diagnostics
from ce_lang.lang import safecache
from ce_lang.lang.analysis import register_source
from ce_lang.lang.checker import Registry
from ce_lang.lang.definitions import check_module
from ce_lang.resources import grammar_dir, stdlib_dir


def stdlib_files() -> list[str]:
    d = stdlib_dir()
    return sorted(os.path.join(d, f) for f in hostfs.own_listdir(d) if f.endswith(".ce"))


@cache
def stdlib_texts() -> dict[str, str]:
    """File name -> text of the standard criteria (what a run archives)."""
    out = {}
    for path in stdlib_files():
        out[os.path.basename(path)] = hostfs.own_read_text(path)
    return out


@cache
def archived_stdlib_registry(texts_key: tuple[tuple[str, str], ...]) -> Registry:
    """The standard criteria as an archived run had them (not today's files): parsed and
    checked once per machine for those texts (`safecache`, as today's are), so a rescore
    or an explain of an archived trial does not pay Lark for them every time."""
    texts = {f"<archived stdlib>/{name}": text for name, text in texts_key}
    for shown, text in texts.items():
        register_source(shown, text)
    cache_name = f"archived_stdlib-{_cache_key(texts)}.pickle"
    cached = safecache.load(cache_name, safecache.ce_lang_classes)
    if isinstance(cached, Registry):
        return cached
    from ce_lang.lang.parser import parse_module

    diags = Diagnostics()
    registry = Registry()
    for shown, text in texts.items():
        module = parse_module(text, shown, diags)
        if module is not None:
            check_module(module, registry, diags, f"stdlib {shown.rsplit('/', 1)[1]}")
    if diags.has_errors:
        raise ValueError("the archived standard criteria do not compile with this ce: "
                         + "; ".join(f"{d.span}: {d.message}" for d in diags)[:2000])
    if not diags:
        safecache.store(cache_name, registry)
    return registry


@cache
def _stdlib() -> tuple[Registry, tuple]:
    """Parsed and checked once per machine: cached (`safecache`: data only, checked) under
    a key of the stdlib's content, the grammar and the language's own modules (start-up
    stays free of Lark)."""
    files = stdlib_files()
    texts = {}
    for path in files:
        texts[path] = hostfs.own_read_text(path)
        register_source(path, texts[path])
    cache_name = f"stdlib-{_cache_key(texts)}.pickle"
    cached = safecache.load(cache_name, safecache.ce_lang_classes)
    if isinstance(cached, Registry):
        return cached, ()
    from ce_lang.lang.parser import parse_module

    diags = Diagnostics()
    registry = Registry()
    for path in files:
        module = parse_module(texts[path], path, diags)
        if module is not None:
            check_module(module, registry, diags, f"stdlib {os.path.basename(path)}")
    if not diags:
        safecache.store(cache_name, registry)
    return registry, tuple(diags)


@cache
def stdlib_records(names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The records `names` (RecordType) and their fields' defaults: what
    ce_lang.schema.records generates its classes from at import, in every process that
    loads a plan. Cached apart from the whole library: unpickling its ~2,700 objects cost
    each `ce run` ~10 ms for three records."""
    texts = {path: hostfs.own_read_text(path) for path in stdlib_files()}
    cache_name = f"stdlib-records-{_cache_key(texts)}.pickle"
    cached = safecache.load(cache_name, safecache.ce_lang_classes)
    if isinstance(cached, tuple) and len(cached) == 2 and tuple(cached[0]) == names:
        return cached
    registry = stdlib_registry()
    out = ({n: registry.records[n] for n in names},
           {n: registry.record_defaults.get(n, {}) for n in names})
    safecache.store(cache_name, out)
    return out


def _cache_key(texts: dict[str, str]) -> str:
    h = hashlib.sha256()
    lang_dir = os.path.dirname(os.path.abspath(__file__))
    sources = [os.path.join(lang_dir, f) for f in sorted(hostfs.own_listdir(lang_dir))
               if f.endswith(".py")]
    sources += [os.path.join(grammar_dir(), "criteria.lark")]
    for path in sources:
        h.update(hostfs.own_read_bytes(path))
    for path in sorted(texts):  # full paths: spans in the pickle name these files
        h.update(path.encode() + b"\0" + texts[path].encode())
    return h.hexdigest()[:24]




def stdlib_registry() -> Registry:
    """The standard library, checked once per process. Its diagnostics are bugs in ce."""
    registry, diags = _stdlib()
    if diags:
        raise RuntimeError("the standard criteria library has errors:\n"
                           + "\n".join(f"{d.span}: {d.message}" for d in diags))
    return registry


def user_registry() -> Registry:
    """A registry that starts with the standard library; user files are added to it."""
    base = stdlib_registry()
    registry = Registry()
    registry.records = dict(base.records)
    registry.record_defaults = dict(base.record_defaults)
    registry.criteria = dict(base.criteria)
    registry.origin = dict(base.origin)
    return registry


def load_file(path: str, registry: Registry, diags: Diagnostics, origin: str | None = None,
              span=None) -> bool:
    """Parse and check one .ce file into `registry`; `origin` is the name users wrote."""
    shown = origin or path
    try:
        text = hostfs.read_text(path)
    except UnicodeDecodeError as exc:
        diags.emit("CE0611", f"cannot read criteria file {shown!r}: not UTF-8 ({exc.reason} "
                   f"at byte {exc.start})", span)
        return False
    except OSError as exc:
        diags.emit("CE0611", f"cannot read criteria file {shown!r}: {exc.strerror}", span)
        return False
    register_source(path, text)
    from ce_lang.lang.parser import parse_module

    module = parse_module(text, path, diags)
    if module is None:
        return False
    check_module(module, registry, diags, origin or path)
    return True




def load_text(text: str, name: str, registry: Registry, diags: Diagnostics) -> None:
    """Definitions from text (a plan's embedded user criteria)."""
    register_source(name, text)
    from ce_lang.lang.parser import parse_module

    module = parse_module(text, name, diags)
    if module is not None:
        check_module(module, registry, diags, name)


def registry_for_sources(sources: dict[str, str],
                         stdlib: dict[str, str] | None = None) -> Registry:
    """The definitions a plan grades with: the standard criteria (today's, or `stdlib`,
    an archived copy), then the plan's own `.ce` files: parsed and checked once per
    machine for those texts over that standard library (`safecache`), so a run of cached
    plans does not import Lark for them."""
    base = stdlib_registry() if stdlib is None else \
        archived_stdlib_registry(tuple(sorted(stdlib.items())))
    if not sources:
        return base
    for name, text in sorted(sources.items()):
        register_source(name, text)
    # keyed by the standard criteria as the pickle's spans name them, and the user's
    standard = {os.path.join(stdlib_dir(), n): t for n, t in stdlib_texts().items()} \
        if stdlib is None else {f"<archived stdlib>/{n}": t for n, t in stdlib.items()}
    cache_name = f"user_criteria-{_cache_key({**standard, **sources})}.pickle"
    cached = safecache.load(cache_name, safecache.ce_lang_classes)
    if isinstance(cached, Registry):
        return cached
    registry = Registry()
    registry.records = dict(base.records)
    registry.record_defaults = dict(base.record_defaults)
    registry.criteria = dict(base.criteria)
    registry.origin = dict(base.origin)
    diags = Diagnostics()
    for name, text in sorted(sources.items()):
        load_text(text, name, registry, diags)
    if diags.has_errors:
        raise ValueError("; ".join(f"{d.span}: {d.message}" for d in diags))
    if not diags:
        safecache.store(cache_name, registry)
    return registry
