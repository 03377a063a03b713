"""`python -m bench [NAME ...] [--quick]`: run the named benchmarks (default: all)."""
import importlib
import sys

ALL = ["sizing", "cpu", "herd", "dispatch", "cost", "scale", "api", "fairness", "lateness", "startup", "flow", "lanes", "e2e",
       "regions", "clients"]


def main() -> None:
    args = sys.argv[1:]
    names = [a for a in args if not a.startswith("--")] or ALL
    flags = [a for a in args if a.startswith("--")]
    for name in names:
        if name not in ALL:
            sys.exit(f"unknown benchmark {name!r}; one of {', '.join(ALL)}")
        print(f"\n=== bench {name} ===", flush=True)
        importlib.import_module(f"bench.{name}").main(flags)


if __name__ == "__main__":
    main()
