#!/bin/bash
# Harbor verifier: writes the reward to /logs/verifier/reward.txt
if [ -f /app/count.txt ] && [ "$(tr -d '[:space:]' < /app/count.txt)" = "$(wc -w < /app/notes.txt | tr -d '[:space:]')" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
