#!/bin/bash
# reward 1 when answer.txt holds the number of ERROR-level entries
[ -f answer.txt ] || { echo "answer.txt is missing"; exit 1; }
[ "$(tr -d '[:space:]' < answer.txt)" = "7" ] || { echo "wrong count"; exit 1; }
