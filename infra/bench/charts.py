"""The run's charts: PNGs beside its tables, from the same results (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import stats


def charts(results: dict, out: Path, stamp: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []

    def bars(ax, data: dict[str, list[float]], unit: str, title: str):
        names = list(data)
        s = [stats.summary(data[k]) for k in names]
        meds = [x["median"] for x in s]
        err = [[m - x["min"] for m, x in zip(meds, s, strict=True)],
               [x["max"] - m for m, x in zip(meds, s, strict=True)]]
        ax.bar(range(len(names)), meds, yerr=err, capsize=4, color="#e07b39")
        ax.set_xticks(range(len(names)), [n.replace(" (", "\n(") for n in names], fontsize=7, rotation=20, ha="right")
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=9)
        for i, m in enumerate(meds):
            ax.annotate(stats.fmt(m), (i, m), ha="center", va="bottom", fontsize=7)

    for key, title in (("cold", "Cold start: spawn to first result recorded (median, min-max)"),
                       ("tls", "Cold start over HTTP and HTTPS, 1,769 MB CPU share (median, min-max)"),
                       ("imports", "Import phase wall time (median, min-max)"),
                       ("enqueue", "Enqueue rate (median, min-max)")):
        if key in results:
            fig, ax = plt.subplots(figsize=(9, 4.5))
            bars(ax, results[key]["samples"], results[key]["unit"], title)
            if key in ("cold", "tls"):
                ax.set_yscale("log")
            fig.tight_layout()
            p = out / f"bench-{stamp}-{key}.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            made.append(p)
    if "memory" in results and "sizes" in results["memory"]:
        c = results["memory"]
        sizes = list(c["sizes"])
        systems = list(c["sizes"][sizes[0]])
        fig, ax = plt.subplots(figsize=(9, 4.5))
        width = 0.8 / len(systems)
        colors = ("#e07b39", "#4c72b0", "#8c8c8c", "#55a868", "#c44e52")
        for j, name in enumerate(systems):
            s = [stats.summary(c["sizes"][mb][name]) for mb in sizes]
            meds = [x["median"] for x in s]
            err = [[m - x["min"] for m, x in zip(meds, s, strict=True)],
                   [x["max"] - m for m, x in zip(meds, s, strict=True)]]
            xs = [i + (j - (len(systems) - 1) / 2) * width for i in range(len(sizes))]
            ax.bar(xs, meds, width, yerr=err, capsize=3, label=name, color=colors[j % len(colors)])
            for x, m in zip(xs, meds, strict=True):
                ax.annotate(stats.fmt(m), (x, m), ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(sizes)), [f"{int(mb):,} MB" for mb in sizes])
        ax.set_yscale("log")
        ax.set_ylabel("ms")
        ax.legend(fontsize=7)
        ax.set_title(f"Cold start by Lambda memory size (CPU quota per {c['period_us'] // 1000} ms period; "
                     "median, min-max)", fontsize=9)
        fig.tight_layout()
        p = out / f"bench-{stamp}-memory.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    if "dynamodb" in results:
        c = results["dynamodb"]
        fig, ax = plt.subplots(figsize=(9, 4.5))
        bars(ax, {k: [r["jobs_per_s"] for r in v] for k, v in c["runs"].items()}, "jobs/s",
             f"Results in DynamoDB on LocalStack: {c['n']} noop jobs (median, min-max)")
        fig.tight_layout()
        p = out / f"bench-{stamp}-dynamodb.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    if "throughput" in results:
        w = results["throughput"]["workloads"]
        fig, axes = plt.subplots(1, len(w), figsize=(5 * len(w), 4.5))
        for ax, (workload, v) in zip(axes if len(w) > 1 else [axes], w.items(), strict=True):
            bars(ax, {k: [r["jobs_per_s"] for r in runs] for k, runs in v["runs"].items()}, "jobs/s",
                 f"{v['n']} x {workload}")
        fig.suptitle("Throughput on Valkey, spawn to last result (median, min-max)", fontsize=10)
        fig.tight_layout()
        p = out / f"bench-{stamp}-throughput.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    return made
