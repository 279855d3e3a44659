#!/usr/bin/env python3
"""Generate python/kubecore/api/protobuf/schema.py from upstream Go API types (struct tags).

Not part of the package. Reads Go files exported from kubernetes/api and kubernetes/apimachinery
(pkg/apis/meta/v1) into SRC (see `export` below) and writes the schema table module.

Per struct field it keeps: protobuf field number (from the `protobuf:"..."` tag), the JSON name and
omitempty/omitzero (from the `json:"..."` tag), whether the Go type is nil-able (pointer, slice,
map, []byte) and the value type.

usage: gen_schema.py SRC OUT
"""
from __future__ import annotations

import os
import re
import sys

GROUPS = {
    "core": "", "apps": "apps", "batch": "batch", "policy": "policy", "autoscaling": "autoscaling",
    "rbac": "rbac.authorization.k8s.io", "meta": "meta.k8s.io",
}
BASIC = {"string": "string", "bool": "bool", "int32": "int32", "int64": "int64", "int": "int64",
         "uint32": "uint32", "uint64": "uint64", "float64": "double", "float32": "float", "byte": "uint32"}
SPECIAL = {
    ("meta.v1", "Time"): "time", ("meta.v1", "MicroTime"): "microtime",
    ("meta.v1", "Duration"): "duration", ("meta.v1", "FieldsV1"): "fieldsv1",
    ("intstr", "IntOrString"): "intorstring", ("resource", "Quantity"): "quantity",
    ("runtime", "RawExtension"): "rawextension", ("types", "UID"): "string",
    ("types", "NodeName"): "string",
}
# structs marked +protobuf=false upstream (the Table types are JSON-only)
NOT_PROTOBUF = {("meta.v1", "Table"), ("meta.v1", "TableColumnDefinition"), ("meta.v1", "TableRow"),
                ("meta.v1", "TableRowCondition")}
PKG_BY_IMPORT = {
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta.v1",
    "k8s.io/apimachinery/pkg/util/intstr": "intstr",
    "k8s.io/apimachinery/pkg/api/resource": "resource",
    "k8s.io/apimachinery/pkg/runtime": "runtime",
    "k8s.io/apimachinery/pkg/types": "types",
}


class Pkg:
    def __init__(self, key: str) -> None:
        self.key = key
        self.structs: dict[str, list[tuple[str, str, str]]] = {}  # name -> [(field, gotype, tags)]
        self.named: dict[str, str] = {}  # name -> underlying type text
        self.toplevel: set[str] = set()
        self.imports: dict[str, str] = {}  # alias -> pkgkey (merged over files)


def parse_pkg(key: str, d: str) -> Pkg:
    pkg = Pkg(key)
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".go"):
            continue
        text = re.sub(r"/\*.*?\*/", "", open(os.path.join(d, fn)).read(), flags=re.S)
        imports: dict[str, str] = {}
        for m in re.finditer(r'^\s*(?:(\w+)\s+)?"(k8s\.io/[^"]+)"', text, re.M):
            alias, path = m.group(1), m.group(2)
            alias = alias or path.rsplit("/", 1)[1]
            if path in PKG_BY_IMPORT:
                imports[alias] = PKG_BY_IMPORT[path]
            elif path.startswith("k8s.io/api/"):
                imports[alias] = path[len("k8s.io/api/"):].replace("/", ".")
        pkg.imports.update(imports)
        lines = text.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            sm = re.match(r"^type (\w+) struct \{\s*$", line)
            if sm:
                name = sm.group(1)
                fields = []
                i += 1
                while lines[i] != "}":
                    fl = lines[i].strip()
                    i += 1
                    if not fl or fl.startswith("//"):
                        continue
                    if "`" in fl:
                        pre, tag = fl.split("`", 2)[0:2]
                    else:
                        pre, tag = fl.split("//")[0], ""
                    parts = pre.split()
                    if len(parts) == 1:
                        fields.append(("", parts[0], tag))
                    elif len(parts) == 2:
                        fields.append((parts[0], parts[1], tag))
                    else:
                        raise SystemExit(f"cannot parse field {fl!r} in {key}.{name}")
                pkg.structs[name] = fields
                if any(f[0] == "" and f[1] in ("metav1.TypeMeta", "TypeMeta") for f in fields):
                    pkg.toplevel.add(name)
            else:
                tm = re.match(r"^type (\w+) (\S.*)$", line)
                if tm and not tm.group(2).startswith("interface"):
                    pkg.named[tm.group(1)] = tm.group(2).split("//")[0].strip()
            i += 1
    return pkg


def tagval(tags: str, key: str) -> str | None:
    m = re.search(key + r':"([^"]*)"', tags)
    return m.group(1) if m else None


class Gen:
    def __init__(self, pkgs: dict[str, Pkg]) -> None:
        self.pkgs = pkgs
        self.messages: dict[str, list[tuple[int, str, str, str]]] = {}
        self.pending: list[tuple[str, str]] = []
        self.wrappers: set[str] = set()

    def want(self, pkg: str, name: str) -> str:
        full = f"{pkg}.{name}"
        if full not in self.messages and (pkg, name) not in self.pending:
            self.pending.append((pkg, name))
        return full

    def resolve(self, pkg: str, ctx: str, t: str) -> tuple[str, bool]:
        """-> (type code, nilable)."""
        if t.startswith("*"):
            code, _ = self.resolve(pkg, ctx, t[1:])
            return code, True
        if t == "[]byte":
            return "bytes", True
        if t.startswith("[]"):
            code, _ = self.resolve(pkg, ctx, t[2:])
            return "[]" + code, True
        if t.startswith("map["):
            depth, j = 0, 3
            while True:
                if t[j] == "[":
                    depth += 1
                elif t[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            k, _ = self.resolve(pkg, ctx, t[4:j])
            v, _ = self.resolve(pkg, ctx, t[j + 1:])
            return f"map[{k}]{v}", True
        if t in BASIC:
            return BASIC[t], False
        if "." in t:
            alias, name = t.split(".", 1)
            target = self.pkgs[pkg].imports.get(alias)
            if target is None:
                raise SystemExit(f"unknown import {alias} in {pkg}.{ctx}")
        else:
            target, name = pkg, t
        if (target, name) in SPECIAL:
            return SPECIAL[(target, name)], False
        p = self.pkgs.get(target)
        if p is None:
            raise SystemExit(f"unknown package {target} for {t} in {pkg}.{ctx}")
        if name in p.structs:
            return "msg:" + self.want(target, name), False
        if name in p.named:
            under = p.named[name]
            if under == "[]string":  # wrapper message {repeated string items = 1}
                return "strlist", True
            return self.resolve(target, name, under)
        raise SystemExit(f"unresolved type {t} in {pkg}.{ctx}")

    def gen_struct(self, pkg: str, name: str) -> None:
        full = f"{pkg}.{name}"
        out: list[tuple[int, str, str, str]] = []
        self.messages[full] = out
        for fname, gotype, tags in self.pkgs[pkg].structs[name]:
            pb = tagval(tags, "protobuf")
            js = tagval(tags, "json")
            if pb is None or pb == "-":
                if js not in (None, "-") and not (fname == "" and gotype.endswith("TypeMeta")):
                    opts = js.split(",")
                    if "omitempty" not in opts:
                        print(f"note: JSON-only field without omitempty {full}.{fname or gotype}", file=sys.stderr)
                continue
            pbparts = pb.split(",")
            num = int(pbparts[1])
            flags = ""
            if js is None:
                jname = fname
            else:
                opts = js.split(",")
                jname = opts[0]
                if js == "-":
                    jname = ""
                    flags += "-"
                if "omitempty" in opts[1:]:
                    flags += "E"
                if "omitzero" in opts[1:]:
                    flags += "Z"
                if fname == "" and (jname == "" or "inline" in opts[1:]) and js != "-":
                    flags += "I"
            if fname == "" and not jname and "I" not in flags and "-" not in flags:
                flags += "I"
            code, nilable = self.resolve(pkg, name, gotype)
            if nilable:
                flags += "P"
            out.append((num, jname, code, flags))

    def run(self) -> None:
        for key in self.pkgs:
            for name in sorted(self.pkgs[key].structs):
                if (key, name) not in NOT_PROTOBUF:
                    self.want(key, name)
        while self.pending:
            pkg, name = self.pending.pop(0)
            if f"{pkg}.{name}" not in self.messages:
                self.gen_struct(pkg, name)


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    pkgs: dict[str, Pkg] = {}
    for root, _dirs, files in sorted(os.walk(src)):
        if any(f.endswith(".go") for f in files):
            rel = os.path.relpath(root, src)
            key = rel.replace("/", ".")
            pkgs[key] = parse_pkg(key, root)
    g = Gen(pkgs)
    g.run()
    kinds: list[tuple[str, str, str, str]] = []
    for key, p in sorted(pkgs.items()):
        grp_dir, version = key.split(".")
        group = GROUPS.get(grp_dir, f"{grp_dir}.k8s.io")
        for name in sorted(p.toplevel):
            if f"{key}.{name}" in g.messages:
                kinds.append((group, version, name, f"{key}.{name}"))
    with open(out, "w") as f:
        f.write('"""Protobuf schemas of the Kubernetes built-in API types (generated table; see README.md beside it).\n\n')
        f.write("Derived from the struct tags of the upstream Go types (k8s.io/api, k8s.io/apimachinery\n")
        f.write("pkg/apis/meta/v1): the `protobuf` tag gives the field number, the `json` tag the JSON name and\n")
        f.write("omitempty/omitzero. Regenerate rather than hand-edit.\n\n")
        f.write("MESSAGES[name] is a tuple of fields in Go struct order (= JSON key order), each\n")
        f.write("(number, json_name, type, flags):\n")
        f.write("  type: string bytes bool int32 int64 uint32 uint64 double float | time microtime duration\n")
        f.write("        intorstring quantity rawextension fieldsv1 strlist | msg:<name> | []<type> | map[<k>]<v>\n")
        f.write("  flags: E omitempty, Z omitzero, P nil-able (pointer/slice/map/bytes), I inline (JSON-embedded),\n")
        f.write("         - not in JSON\n")
        f.write('"""\n\n')
        f.write("from __future__ import annotations\n\n")
        f.write("Field = tuple[int, str, str, str]\n\n")
        f.write("MESSAGES: dict[str, tuple[Field, ...]] = {\n")
        for name in sorted(g.messages):
            fields = g.messages[name]
            f.write(f"    {name!r}: (\n")
            for fld in fields:
                f.write(f"        {fld!r},\n")
            f.write("    ),\n")
        f.write("}\n\n")
        f.write("# (group, version, kind) -> message name: the kinds a request body may carry.\n")
        f.write("KINDS: dict[tuple[str, str, str], str] = {\n")
        for group, version, kind, msg in kinds:
            f.write(f"    ({group!r}, {version!r}, {kind!r}): {msg!r},\n")
        f.write("}\n")
    print(f"{len(g.messages)} messages, {len(kinds)} kinds", file=sys.stderr)


if __name__ == "__main__":
    main()
