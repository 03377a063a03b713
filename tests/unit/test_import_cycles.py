"""No import circles: the modules of functions/jobsched and infra/jobsched_infra import one way.

The graph is built from the source with ast: every import, at the top of a module or inside a
function (a deferred import is a dependency all the same), except those under `if TYPE_CHECKING:`.
`from package import name` is an edge to the submodule `package.name` when there is one, else
to the package itself. Any strongly connected group of two or more modules is a circle."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
TREES = [ROOT / "functions" / "jobsched", ROOT / "infra" / "jobsched_infra"]


def module_name(path: pathlib.Path, tree: pathlib.Path) -> str:
    parts = list(path.relative_to(tree.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if _type_checking_only(child):
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _imports(child)


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p, tree): p for tree in TREES for p in tree.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                           for alias in node.names]
            for target in targets:
                while target and target not in files:  # `import a.b.c` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_modules_and_their_imports():
    graph = import_graph()
    assert "jobsched.local.events" in graph and "jobsched_infra.stack" in graph
    assert "jobsched.domain.cron" in graph["jobsched.domain.schedule"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back_through_another():
    assert cycles(import_graph()) == []
