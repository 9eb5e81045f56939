#!/bin/bash
# reward 1 when answer.txt holds the number of distinct words
[ -f answer.txt ] || { echo "answer.txt is missing"; exit 1; }
[ "$(tr -d '[:space:]' < answer.txt)" = "29" ] || { echo "wrong count"; exit 1; }
