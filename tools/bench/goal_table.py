"""The result table of the benchmarks (login.sh, oauth.sh, goals.sh): one row per figure, read from a file
of lines `name|value|limit|unit|op|goal` (op: ge, le, lt, or info for a figure without a goal). Prints
figure, value, limit, ratio (value / limit), goal and met/MISS, then the number of goals missed.
    python3 tools/bench/goal_table.py ROWS [NAME_WIDTH]"""
import sys

OPS = {"ge": (">=", lambda r, g: r >= g), "le": ("<=", lambda r, g: r <= g), "lt": ("<", lambda r, g: r < g)}


def num(text):
    try:
        return float(text)
    except ValueError:
        return float("nan")


def show(value, unit):
    return (f"{value:.2f}" if unit in ("ms", "us/req", "", "MiB") else f"{value:.1f}") + (f" {unit}" if unit else "")


def main():
    rows = [line.rstrip("\n").split("|") for line in open(sys.argv[1]) if line.strip()]
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 44
    print(f"{'figure':<{width}} {'value':>16} {'limit':>16} {'ratio':>7}  {'goal':<7} result")
    missed = 0
    for name, value, limit, unit, op, goal in rows:
        v, l = num(value), num(limit)
        ratio = v / l if l else float("nan")
        if op == "info":
            goal_text, result = "-", "-"
        else:
            sym, test = OPS[op]
            goal_text = f"{sym} {goal}"
            ok = ratio == ratio and test(ratio, float(goal))
            result = "met" if ok else "MISS"
            missed += 0 if ok else 1
        print(f"{name:<{width}} {show(v, unit):>16} {show(l, unit):>16} {ratio:>7.2f}  {goal_text:<7} {result}")
    print(f"{missed} goal(s) missed")


if __name__ == "__main__":
    main()
