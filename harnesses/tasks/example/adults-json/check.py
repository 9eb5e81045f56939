"""Score: the F1 of the names in adults.txt against the expected ones; 1.0 only when also sorted."""
from pathlib import Path

EXPECTED = ['Ada', 'Bruno', 'Chen', 'Emeka', 'Farah', 'Hana', 'Ivo', 'Jun']
path = Path("adults.txt")
got = [line.strip() for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
hits = len(set(got) & set(EXPECTED))
f1 = 2 * hits / (len(set(got)) + len(EXPECTED)) if got else 0.0
print(1.0 if got == EXPECTED else round(min(f1, 0.99), 3))
