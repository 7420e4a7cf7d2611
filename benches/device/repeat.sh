#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"]:
#     OPS=rms_qmatvec,qmatvec ROUNDS=3 bash .devbin/repeat.sh
# Whether a kind's times repeat within one call: `ridge bench --op $OPS` ROUNDS times (30
# launches a case, the faster of two passes each time), every round's rows printed; then
# each case's spread across rounds (max ÷ min). A fit cannot follow a case that moves more
# between rounds than its kind's error; a case that is slow in every round is the kernel's.
source ${B:-.devbin}/setup.sh
{
for round in $(seq 1 ${ROUNDS:-3}); do
  echo "== round $round"
  timeout 150 $B/ridge bench --op "$OPS" --repeats 30 --json "$W/round$round.json" 2>&1 | grep -E "^ *(op|${OPS//,/|}) "
done
python3 - "$W" ${ROUNDS:-3} <<'PY'
import json, sys
w, n = sys.argv[1], int(sys.argv[2])
rounds = [json.load(open(f"{w}/round{i}.json"))["rows"] for i in range(1, n + 1)]
print("== spread across rounds (µs per round, max ÷ min; GB/s of the fastest)")
for rows in zip(*rounds):
    t = [r["measured_ms"] * 1e3 for r in rows]
    r = rows[0]
    print(f"{r['op']:<20} {str(r['shape']):<22} {r['dtype']} " + " ".join(f"{v:8.1f}" for v in t)
          + f"   {max(t) / min(t):.2f}×  {r['bytes'] / min(t) / 1e3:7.0f} GB/s")
PY
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$OUT/" 2>/dev/null
cp "$W"/round*.json "$OUT/" 2>/dev/null
true
