"""``redcron cluster move-shard``: move one shard to another master of a Redis
Cluster, with its keys, the way docs/operations.md ("Resharding") says, after
checks that refuse a move that could break the shard."""

from __future__ import annotations

import click

from redcron.cli.audit import audited, record_cli
from redcron.cli.common import app_option, build_app, echo_json, redis_option
from redcron.engine import MAX_SHARD_KEYS, move_shard, plan_move


@click.group()
def cluster() -> None:
    """Redis Cluster operations on the deployment's shards."""


@cluster.command("move-shard")
@click.argument("shard", type=click.IntRange(min=0))
@click.option(
    "--to",
    "target",
    required=True,
    metavar="HOST:PORT",
    help="The master to move the shard to, as the cluster names it (CLUSTER NODES).",
)
@click.option(
    "--max-keys",
    type=click.IntRange(min=0),
    default=MAX_SHARD_KEYS,
    show_default=True,
    help="Refuse a shard holding more keys: its master is busy for the whole copy.",
)
@click.option("--dry-run", is_flag=True, help="Check and say what would move; move nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the move as JSON.")
@app_option
@redis_option
@audited("shard.move")
def move_shard_cmd(
    shard: int,
    target: str,
    max_keys: int,
    dry_run: bool,
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Move SHARD's hash slot, with every key in it, to the master --to.

    Refused (nothing moved) when the Redis URL is no cluster, the shard or the
    master is unknown, a node sees another failing (a failover may be under
    way), the slot is already migrating or importing somewhere (a move half
    done), or it holds more than --max-keys keys. The keys move in one script
    call on the source master, so no script ever runs on half a shard; that
    master serves nothing else meanwhile. Other shards in the same slot move
    with it (they are named)."""  # fmt: skip
    app = build_app(app_path, redis_url)
    try:
        plan = plan_move(app.broker, shard, target, max_keys)
        moved = None if dry_run or not plan.needed else move_shard(app.broker, plan)
        if moved is not None:
            detail = f"slot {plan.slot}, {moved} keys, {plan.source} -> {plan.target}"
            shards = [str(s) for s in (shard, *plan.together)]
            record_cli(app.broker, "shard.move", None, shards, detail)
    finally:
        app.close()
    if as_json:
        echo_json({**plan.__dict__, "dry_run": dry_run, "moved": moved})
        return
    if not plan.needed:
        click.echo(f"shard {shard} (slot {plan.slot}) is on {target} already: nothing to move")
        return
    also = f"; shards {plan.together} share the slot and move too" if plan.together else ""
    what = f"shard {shard} (slot {plan.slot}, {plan.keys} keys) from {plan.source} to {target}"
    if dry_run:
        click.echo(f"would move {what}{also}")
    else:
        click.echo(f"moved {what}: {moved} keys{also}")
