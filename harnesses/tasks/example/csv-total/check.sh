#!/bin/bash
# reward 1 when total.txt holds the sum of the amount column (to the cent)
[ -f total.txt ] || { echo "total.txt is missing"; exit 1; }
python - <<'PY'
import sys
try:
    value = float(open('total.txt').read().strip())
except ValueError:
    sys.exit('total.txt does not hold a number')
sys.exit(0 if abs(value - 2435.2) < 0.005 else 'wrong total')
PY
