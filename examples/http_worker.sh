#!/usr/bin/env bash
# A redcron worker in shell: lease a command task, run it, heartbeat while it
# runs, report complete or fail.  Needs curl and jq.
set -u
API=${REDCRON_API:-http://127.0.0.1:8000}/v1/worker  # `make run` serves :8000
WORKER=${WORKER_ID:-sh-$(hostname)-$$}
QUEUES=${QUEUES:-'["commands"]'}
ROUNDS=${ROUNDS:-0}  # lease rounds before exiting; 0: forever

TOKEN=${REDCRON_TOKEN:?a worker token: redcron workers token create --queues commands}

post() {
  curl -sf -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d "$2" "$API/$1"
}

lease() {  # the leased tasks (a JSON array); else one line on stderr and exit 1
  local out status
  while :; do
    if ! out=$(curl -s -X POST -H "Authorization: Bearer $TOKEN" \
      -H 'Content-Type: application/json' -w '\n%{http_code}' -d "$1" "$API/lease"); then
      echo "http_worker.sh: nothing answers at $API (start redcron dashboard, or set REDCRON_API)" >&2
      exit 1
    fi
    status=${out##*$'\n'}
    out=${out%$'\n'*}
    case $status in
      200) printf '%s\n' "$out"; return ;;
      503) sleep 1 ;;  # Redis is down or failing over: try again
      *) echo "http_worker.sh: lease refused, HTTP $status: $(jq -r .error.message <<<"$out" 2>/dev/null)" >&2
        exit 1 ;;
    esac
  done
}

run() {  # one leased task (JSON) -> run it, heartbeating, then report
  local task=$1 id hb pid code state=ok next
  id=$(jq -r .lease_id <<<"$task")
  hb=$(jq '[(.ttl_s / 3 | floor), 1] | max' <<<"$task")  # heartbeat 3x per TTL
  mapfile -t argv < <(jq -r '.command[]' <<<"$task")
  mapfile -t envs < <(jq -r '.env // {} | to_entries[] | "\(.key)=\(.value)"' <<<"$task")
  # a clean environment: never this script's token (docs/operations.md, Trust boundaries)
  env -i PATH="$PATH" HOME="$HOME" LANG="${LANG:-C.UTF-8}" "${envs[@]}" "${argv[@]}" </dev/null & pid=$!
  next=$((SECONDS + hb))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2
    if ((SECONDS >= next)); then
      next=$((SECONDS + hb))
      state=$(post heartbeat "$(jq -nc --arg w "$WORKER" --arg l "$id" \
        '{worker_id: $w, lease_ids: [$l]}')" | jq -r --arg l "$id" '.[$l]') || state=ok
      [ "$state" = ok ] || kill -TERM "$pid"  # revoked (cancelled) or lost
    fi
  done
  wait "$pid"; code=$?
  # lost: someone else owns the task now; revoked: cancelled, already ended
  if [ "$state" != ok ]; then return; fi
  if [ "$code" = 0 ]; then
    post complete "$(jq -nc --arg l "$id" '{lease_id: $l, result: {exit_code: 0}}')"
  else
    post fail "$(jq -nc --arg l "$id" --argjson c "$code" \
      '{lease_id: $l, error: "exit code \($c)", retryable: true, exit_code: $c}')"
  fi
  echo
}

n=0
while [ "$ROUNDS" = 0 ] || [ "$n" -lt "$ROUNDS" ]; do
  n=$((n + 1))
  leases=$(lease "$(jq -nc --arg w "$WORKER" --argjson q "$QUEUES" \
    '{worker_id: $w, queues: $q, wait_s: 20}')") || exit 1
  while read -r task; do run "$task"; done < <(jq -c '.[]' <<<"$leases")
done
