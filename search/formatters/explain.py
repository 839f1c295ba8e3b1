"""How each result of a hybrid search got its score (`pmd query --explain`): the per-list ranks, the
fusion, the re-ranking and the stage timings carried in a SearchResponse's `explain` and `timings`."""

from __future__ import annotations

from search.formatters.registry import renders


@renders("explain", "cli")
def _cli(response, **_) -> str:
    """Plain text: how each result got its score."""
    lines = ["", "explain:"]
    for result in response.results:
        e = result.explain or {}
        if not e:
            continue
        lines.append(f"  #{e['rank']} {result.uri}  final {e['final']:.4f}")
        for name, hit in e.get("lists", {}).items():
            score = "" if hit.get("score") is None else f" score {hit['score']:.4f}"
            lines.append(f"      {name:<22} rank {hit['rank']:>3}{score}  z {hit['z']:+.3f}")
        f = e.get("fusion") or {}
        z = e.get("z") or {}
        terms = " + ".join(
            f"{f.get('w_' + kind, 0):.2f} × z_{kind} {z[kind]:+.3f}" for kind in ("keyword", "vector") if kind in z
        )
        lines.append(
            f"      fused {terms} = {e['fused']:+.4f} (fusion rank {e['fusion_rank']}); retrieval {e['retrieval']:.4f}"
        )
        if e.get("beyond_candidate_limit"):
            lines.append("      beyond the candidate limit: not re-ranked, kept in fusion order")
        elif e.get("rerank") is not None:
            w = e["blend_weight"]
            lines.append(
                f"      blend {w:.2f} × retrieval {e['retrieval']:.4f} + {1 - w:.2f} × rerank "
                f"{e['rerank']:.4f} = {e['final']:.4f}"
            )
        else:
            lines.append(f"      not re-ranked: final = retrieval {e['retrieval']:.4f}")
    first = next((r.explain for r in response.results if r.explain), None)
    if first:
        plan = first.get("plan") or {}
        variants = ", ".join(f"{v['type']}: {v['text']}" for v in plan.get("variants", [])) or "none"
        f = first.get("fusion") or {}
        nqc = ", ".join(f"{k} {v:.3f}" for k, v in (f.get("nqc") or {}).items() if v is not None)
        lines.append(
            f"  fusion: w_keyword {f.get('w_keyword', 0):.2f}, w_vector {f.get('w_vector', 0):.2f} "
            f"(NQC {nqc or 'none'}); #1's evidence w_k·keyword + w_v·vector = "
            f"{f.get('top_evidence', 0):.4f}"
        )
        lines.append(
            f"  plan: {plan.get('source')}{' (strong keyword signal)' if plan.get('strong_signal') else ''}"
            f"; variants: {variants}"
        )
        if plan.get("intent"):
            lines.append(f"  intent: {plan['intent']}")
        for off in plan.get("off") or []:
            lines.append(f"  off: {off}")
        reranker = first.get("reranker") or {}
        if reranker.get("model"):
            lines.append(
                f"  reranker: {reranker['model']} ({reranker.get('method') or 'not used'}; "
                f"{reranker.get('judged', 0)} judged, {reranker.get('cached', 0)} cached, "
                f"{reranker.get('unjudged', 0)} left out)"
            )
    if response.timings:
        lines.append("  timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in response.timings.items()))
    return "\n".join(lines) + "\n"
