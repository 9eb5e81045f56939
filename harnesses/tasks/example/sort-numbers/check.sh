#!/bin/bash
# reward 1 when sorted.txt holds the numbers in ascending order (the expected file sits beside this check, outside the workspace)
[ -f sorted.txt ] || { echo "sorted.txt is missing"; exit 1; }
diff -q <(grep -v '^[[:space:]]*$' sorted.txt) "$TASK_DIR/expected.txt" > /dev/null || { echo "not the expected order"; exit 1; }
