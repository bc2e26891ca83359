"""The shape of xllm's code, as issue #37 measures it: export cells (how many, mean lines, the share followed by a test cell
before the next export), long lines, semicolon-joined statements, uses of another module's private members, and imports of a later notebook's module.

    python scripts/code_shape.py            # the figures and the private uses, one per line
    python scripts/code_shape.py --json     # the figures as JSON
    python scripts/code_shape.py --by-notebook [PREFIX...]   # export-cell figures per notebook (those starting with a PREFIX)

tests/test_code_shape.py holds what #37 reached: no private use across modules, no import of a later notebook, >= 60% tested, and a
ratchet on the mean export-cell length (#37 aims at 12 lines).
"""
import ast, json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cells(nb: Path) -> list[tuple[str, str]]:
    "(kind, source) of each code cell: 'export' (#| export / exports), 'test' (runs something), 'other' (show_doc, hidden, empty)."
    out = []
    for c in json.loads(nb.read_text())["cells"]:
        if c["cell_type"] != "code": continue
        src = "".join(c["source"])
        flags = [l for l in src.splitlines() if l.startswith("#|")]
        body = [l for l in src.splitlines() if l.strip() and not l.startswith("#|")]
        if any(re.match(r"#\|\s*(export|exports|exporti)\b", f) for f in flags): kind = "export"
        elif not body or any(re.match(r"#\|\s*(hide|default_exp)\b", f) for f in flags) or all(l.startswith("show_doc(") for l in body): kind = "other"
        else: kind = "test"
        out.append((kind, src))
    return out


def notebook_figures(nbs: Path = ROOT / "nbs", names=None) -> dict:
    """Export cells over every notebook (or those whose file name starts with one of `names`): count, mean lines (code lines,
    flags excluded), share followed by a test before the next export."""
    sizes, tested = [], 0
    for nb in sorted(nbs.glob("*.ipynb")):
        if names and not any(nb.name.startswith(n) for n in names): continue
        cs = cells(nb)
        for i, (kind, src) in enumerate(cs):
            if kind != "export": continue
            sizes.append(len([l for l in src.splitlines() if l.strip() and not l.startswith("#|")]))
            nxt = next((k for k, _ in cs[i + 1:] if k != "other"), None)
            tested += nxt == "test"
    return {"export_cells": len(sizes), "mean_lines": round(sum(sizes) / max(len(sizes), 1), 1),
            "tested_share": round(tested / max(len(sizes), 1), 3)}


def code_figures(pkg: Path = ROOT / "xllm") -> dict:
    "Over the package's modules: code lines, the share over 120 characters, statements joined by ';'."
    lines = long = semis = 0
    for f in sorted(pkg.glob("*.py")):
        if f.name == "_modidx.py": continue
        src = f.read_text()
        code = [l for l in src.splitlines() if l.strip() and not l.strip().startswith("#")]
        lines += len(code); long += sum(len(l) > 120 for l in code)
        semis += sum(1 for t in _tokens(src) if t == ";")
    return {"code_lines": lines, "over_120": round(long / max(lines, 1), 3), "semicolons": semis}


def _tokens(src: str):
    import io, tokenize
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            if t.type == tokenize.OP: yield t.string
    except tokenize.TokenError: return


def private_uses(pkg: Path = ROOT / "xllm") -> list[str]:
    """Uses of another xllm module's private names: `from xllm.m import _x` (or `from .m import _x`), and `m._x` where `m` is
    an imported xllm module. `module:line: what` each."""
    mods = {f.stem for f in pkg.glob("*.py")}
    out = []
    for f in sorted(pkg.glob("*.py")):
        if f.name == "_modidx.py": continue
        tree = ast.parse(f.read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                m = (node.module or "").removeprefix("xllm.").removeprefix(".") if (node.module or "").startswith("xllm") or node.level else None
                if node.level and node.module is None: m = None
                if m in mods and m != f.stem:
                    for a in node.names:
                        if a.name.startswith("_") and not a.name.startswith("__"): out.append(f"{f.stem}:{node.lineno}: from {m} import {a.name}")
                if node.module in ("xllm", None) and node.level in (0, 1):
                    for a in node.names:
                        if a.name in mods: aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("xllm.") and a.name[5:] in mods: aliases[a.asname or a.name] = a.name[5:]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                v = node.value
                name = v.id if isinstance(v, ast.Name) else (ast.unparse(v) if isinstance(v, ast.Attribute) else None)
                if name in aliases and aliases[name] != f.stem: out.append(f"{f.stem}:{node.lineno}: {name}.{node.attr}")
    return out


def later_imports(pkg: Path = ROOT / "xllm") -> list[str]:
    """Imports of a module exported by a later notebook (notebook order = file-name order), at module level or inside a
    function: `module (notebook) -> module (notebook)` each. The notebooks are read in order, so each may use only earlier ones."""
    source = {}
    for f in pkg.glob("*.py"):
        m = re.search(r"File to edit: \.\./nbs/(\S+?\.ipynb)", f.read_text())
        if m: source[f.stem] = m.group(1)
    out = []
    for f in sorted(pkg.glob("*.py")):
        if f.stem not in source: continue
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level: names = [mod] if mod else [a.name for a in node.names]
                elif mod.startswith("xllm."): names = [mod[5:]]
                elif mod == "xllm": names = [a.name for a in node.names]
            elif isinstance(node, ast.Import): names = [a.name[5:] for a in node.names if a.name.startswith("xllm.")]
            for n in names:
                n = n.split(".")[0]
                if n in source and source[n] > source[f.stem]:
                    out.append(f"{f.stem} ({source[f.stem]}):{node.lineno} -> {n} ({source[n]})")
    return sorted(set(out))


if __name__ == "__main__":
    if "--by-notebook" in sys.argv:
        prefixes = sys.argv[sys.argv.index("--by-notebook") + 1:]
        for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
            if prefixes and not any(nb.name.startswith(p) for p in prefixes): continue
            f = notebook_figures(names=[nb.name])
            if f["export_cells"]: print(f"{nb.name:32} export cells {f['export_cells']:3}  mean lines {f['mean_lines']:5}  tested {f['tested_share']:.0%}")
        print("together:", notebook_figures(names=prefixes or None))
        sys.exit(0)
    figures = {**notebook_figures(), **code_figures()}
    uses = private_uses()
    figures["private_uses_across_modules"] = len(uses)
    later = later_imports()
    figures["imports_of_later_notebooks"] = len(later)
    if "--json" in sys.argv: print(json.dumps(figures, indent=1))
    else:
        for k, v in figures.items(): print(f"{k}: {v}")
        for u in uses: print("  private:", u)
        for u in later: print("  later:", u)
