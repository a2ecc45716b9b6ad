#!/usr/bin/env bash
# How long a gateway takes to answer its first request, and what it holds then, by data-plane threads and tokenizer
# (bench/RESULTS.md "What a data-plane thread costs to start and to keep"): one `ear sim` behind it, the gateway
# spawned, a completion POSTed every 0.1 s until one answers 200, then its resident memory 8 s later.
# usage: bench/startup.sh CHECKOUT THREADS TOKENIZER   env: PORT (29700; the sim takes PORT + 1)
set -u
DIR=${1:?checkout}; N=${2:?threads}; T=${3:?tokenizer}; P=${PORT:-29700}; S_PORT=$((P + 1))
cd "$DIR" || exit 2
node dist/src/cli/ear.js sim --port $S_PORT --tokenizer character >/dev/null 2>&1 & SIM=$!
for k in $(seq 1 60); do curl -sf localhost:$S_PORT/health >/dev/null && break; sleep 0.2; done
MODEL=$(curl -s localhost:$S_PORT/v1/models | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data[0].id))')
T0=$(date +%s.%N)
node dist/src/cli/ear.js serve --port $P --backend http://127.0.0.1:$S_PORT --http-threads "$N" --tokenizer "$T" >/dev/null 2>&1 & E=$!
for k in $(seq 1 3000); do
  c=$(curl -s -m 20 -o /dev/null -w '%{http_code}' -H 'content-type: application/json' localhost:$P/v1/completions \
    -d "{\"model\":\"$MODEL\",\"prompt\":\"hello there\",\"max_tokens\":2}")
  [ "$c" = 200 ] && break
  sleep 0.1
done
FIRST=$(echo "$(date +%s.%N) - $T0" | bc)
sleep 8
RSS=$(( $(ps -o rss= -p $E) / 1024 ))
kill -TERM $E; wait $E; kill $SIM; wait $SIM 2>/dev/null
echo "$(git rev-parse --short HEAD) threads=$N tokenizer=$T first 200 after ${FIRST}s, resident ${RSS} MB"
