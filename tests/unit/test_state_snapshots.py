"""The local stack's snapshots take a bounded share of its time however large its state grows."""
from jobsched.local.state import SNAPSHOT_PAUSE_FACTOR, SNAPSHOT_SECONDS, snapshot_pause


def test_a_quick_snapshot_is_followed_by_the_one_second_pause():
    assert snapshot_pause(0.001) == SNAPSHOT_SECONDS == 1.0


def test_a_slow_snapshot_waits_long_enough_to_stay_within_a_tenth_of_the_time():
    for took in (0.2, 0.5, 3.0):
        pause = snapshot_pause(took)
        assert pause >= SNAPSHOT_SECONDS
        assert took / (took + pause) <= 1 / (1 + SNAPSHOT_PAUSE_FACTOR) + 1e-9 == 0.1 + 1e-9


def test_a_timer_pack_survives_a_restart_of_the_local_stack(tmp_path):
    """A pack's timers are a binary attribute, which moto keeps as bytes: the state file holds them
    as base64 and a restart puts back the same bytes (before, the snapshot could not be written)."""
    import boto3
    from moto import mock_aws

    from jobsched.domain.timer_packs import pack_timers, unpack
    from jobsched.domain.timers import Timer, TimerKind
    from jobsched.local.state import StateKeeper

    timers = [Timer(1_800_000_000_000 + i, TimerKind.FIRE, "t", f"job_{i:032x}", 1, 0) for i in range(400)]
    packs, _ = pack_timers(timers)
    schema = dict(KeySchema=[{"AttributeName": "bucket", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                  AttributeDefinitions=[{"AttributeName": "bucket", "AttributeType": "S"},
                                        {"AttributeName": "sk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="before", **schema)
        for item in packs:
            client.put_item(TableName="before", Item=item)
        StateKeeper(tmp_path, {"Timers": "before"})._write(StateKeeper(tmp_path, {"Timers": "before"}).capture())
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="after", **schema)
        assert StateKeeper(tmp_path, {"Timers": "after"}).restore(boto3.session.Session(region_name="us-east-1"))["items"] \
            == len(packs)
        restored = client.scan(TableName="after")["Items"]
    assert sorted(t.sort_key for i in restored for t in unpack(i)) == sorted(t.sort_key for t in timers)
