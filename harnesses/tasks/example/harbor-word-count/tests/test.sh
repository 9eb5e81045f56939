#!/bin/bash
# Harbor verifier: writes the reward to /logs/verifier/reward.txt.
# The word count is taken from the verifier's own copy of the input (/tests/notes.txt), never from /app/notes.txt:
# the agent may rewrite anything in /app, so an input read from there proves nothing.
expected="$(wc -w < /tests/notes.txt | tr -d '[:space:]')"
if [ -f /app/count.txt ] && [ "$(tr -d '[:space:]' < /app/count.txt)" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
