"""Tenant fairness at hand-off: a tenant's fires beyond its share of a second become visible in
the following seconds; other tenants' are untouched."""
from jobsched.service.fairness import FairShare


def test_a_tenants_excess_is_spread_over_the_following_seconds():
    fair = FairShare(fires_per_second=4, segments=2)  # 2 a second in each segment's tick
    herd = [fair.visible_at("big", 10_000 + i) for i in range(5)]
    assert [v // 1000 for v in herd] == [10, 10, 11, 11, 12]
    assert [v % 1000 for v in herd] == [0, 1, 2, 3, 4]  # the offset within the second is kept
    assert fair.visible_at("small", 10_500) == 10_500  # another tenant is not behind the herd
    assert fair.visible_at("small", 10_600) == 10_600
    assert fair.visible_at("big", 11_000) // 1000 == 12  # later seconds of the herd queue behind it
    assert fair.visible_at("big", 30_000) == 30_000  # a second with room: on time


def test_off_when_zero():
    fair = FairShare(fires_per_second=0, segments=4)
    assert [fair.visible_at("big", 5_000) for _ in range(1000)] == [5_000] * 1000


def test_the_benchmark_model_shows_the_herd_behind_the_small_tenant_only_without_fairness():
    """bench fairness's worker model on a hand-made lane: without spreading, the small tenant's
    messages are drawn among the herd's; with it, they are among few."""
    from bench.fairness import drain

    due = 60_000
    small = [("small", due, due) for _ in range(10)]
    herd = [("herd", due, due) for _ in range(1000)]
    fair = FairShare(fires_per_second=100, segments=1)
    spread = [("herd", due, fair.visible_at("herd", due)) for _ in range(1000)]
    assert max(drain(small, 200)["small"]) < 100
    assert max(drain(small + herd, 200)["small"]) > 1000  # behind a share of the herd
    assert max(drain(small + spread, 200)["small"]) < 1000  # among the herd's share of the second
