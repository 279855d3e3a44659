#!/usr/bin/env python3
"""Generate python/kubecore/api/openapi_facts.py from the comment markers of the upstream Go API types.

Not part of the package (a development script, like protobuf/_gen_schema.py). SRC is laid out as
for `_gen_schema.py` (`<group>/<version>/*.go` from k8s.io/api, `meta/v1/*.go` from
k8s.io/apimachinery pkg/apis/meta/v1). Per struct it keeps only facts the OpenAPI documents publish:

- which JSON fields are required (no `+optional`/`+k8s:optional` marker, no omitempty/omitzero);
- `+listType` / `+listMapKey` of list fields;
- `+structType=atomic` on the struct and `+mapType=atomic` on map fields.

usage: python -m kubecore.api._gen_openapi_facts SRC OUT
"""
from __future__ import annotations

import os
import re
import sys

FIELD = re.compile(r"^(\w*)\s*(\S+)?\s*`([^`]*)`")


def _markers(comments: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in comments:
        m = re.match(r"^\s*//\s*\+([\w:.-]+)(?:=(\S+))?\s*$", c)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2) or "")
    return out


def _json_tag(tags: str) -> list[str] | None:
    m = re.search(r'json:"([^"]*)"', tags)
    return m.group(1).split(",") if m else None


def parse_file(text: str) -> dict[str, tuple[dict[str, list[str]], list[tuple[str, list[str], dict[str, list[str]]]]]]:
    """struct name -> (struct markers, [(json name, json options, field markers)])."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = text.split("\n")
    structs: dict[str, tuple[dict[str, list[str]], list[tuple[str, list[str], dict[str, list[str]]]]]] = {}
    comments: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        sm = re.match(r"^type (\w+) struct \{\s*$", line)
        if not sm:
            comments = comments + [line] if line.startswith("//") else []
            i += 1
            continue
        smark = _markers(comments)
        fields: list[tuple[str, list[str], dict[str, list[str]]]] = []
        fcomments: list[str] = []
        i += 1
        while lines[i] != "}":
            fl = lines[i].strip()
            i += 1
            if fl.startswith("//") or not fl:
                fcomments = fcomments + [fl] if fl else []
                continue
            opts = _json_tag(fl.split("`", 1)[1]) if "`" in fl else None
            if opts is not None and opts[0] not in ("-",):
                fields.append((opts[0], opts[1:], _markers(fcomments)))
            fcomments = []
        structs[sm.group(1)] = (smark, fields)
        comments = []
        i += 1
    return structs


def facts(structs: dict[str, tuple[dict[str, list[str]], list[tuple[str, list[str], dict[str, list[str]]]]]]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for name, (smark, fields) in structs.items():
        entry: dict[str, object] = {}
        required: list[str] = []
        lists: dict[str, tuple[str, tuple[str, ...]]] = {}
        atomic_maps: list[str] = []
        for jname, opts, mk in fields:
            if not jname or "inline" in opts:
                continue
            if not ("omitempty" in opts or "omitzero" in opts or "optional" in mk or "k8s:optional" in mk):
                required.append(jname)
            if "listType" in mk:
                lists[jname] = (mk["listType"][0], tuple(mk.get("listMapKey", ())))
            if mk.get("mapType") == ["atomic"]:
                atomic_maps.append(jname)
        if required:
            entry["required"] = tuple(required)
        if lists:
            entry["lists"] = lists
        if atomic_maps:
            entry["atomic_maps"] = tuple(atomic_maps)
        if smark.get("structType") == ["atomic"]:
            entry["atomic"] = True
        out[name] = entry
    return out


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    table: dict[str, dict[str, object]] = {}
    for root, _dirs, files in sorted(os.walk(src)):
        gofiles = sorted(f for f in files if f.endswith(".go") and not f.endswith("_test.go") and not f.startswith("zz_"))
        if not gofiles:
            continue
        key = os.path.relpath(root, src).replace("/", ".")
        for fn in gofiles:
            with open(os.path.join(root, fn)) as f:
                for name, entry in facts(parse_file(f.read())).items():
                    if entry:
                        table[f"{key}.{name}"] = entry
    with open(out, "w") as f:
        f.write('"""OpenAPI facts of the Kubernetes built-in API types (generated table; regenerate, do not hand-edit).\n\n')
        f.write("Derived from the comment markers and json tags of the upstream Go types by `_gen_openapi_facts.py`\n")
        f.write("(same sources as protobuf/schema.py). FACTS[message] holds, when present:\n")
        f.write("  required:    JSON fields without +optional, omitempty or omitzero (upstream\'s `required`)\n")
        f.write("  lists:       field -> (x-kubernetes-list-type, x-kubernetes-list-map-keys)\n")
        f.write("  atomic_maps: map fields marked +mapType=atomic\n")
        f.write("  atomic:      the struct is +structType=atomic (x-kubernetes-map-type: atomic)\n")
        f.write('"""\n\n')
        f.write("from __future__ import annotations\n\nfrom typing import Any\n\n")
        f.write("FACTS: dict[str, dict[str, Any]] = {\n")
        for name in sorted(table):
            f.write(f"    {name!r}: {table[name]!r},\n")
        f.write("}\n")
    print(f"{len(table)} structs with facts", file=sys.stderr)


if __name__ == "__main__":
    main()
