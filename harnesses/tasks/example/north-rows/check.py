"""Score: half for the header, half for the fraction of expected rows in order; extra rows cost."""
from pathlib import Path

HEADER = "region,product,amount"
EXPECTED = ['North,paper,61.47', 'North,pens,125.71', 'North,ink,71.32', 'North,pens,147.58', 'North,folders,16.50']
path = Path("north.csv")
lines = [line.strip() for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
if not lines:
    print(0.0)
else:
    header_ok = lines[0] == HEADER
    body = lines[1:] if header_ok else lines
    matched = sum(1 for a, b in zip(body, EXPECTED) if a == b)
    score = 0.5 * header_ok + 0.5 * matched / max(len(EXPECTED), len(body))
    print(round(score, 3))
