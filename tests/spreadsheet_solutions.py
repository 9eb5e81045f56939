"""Hand-written programs for three shipped SpreadsheetBench tasks: a correct one and a subtly wrong one each.

37609 writes Excel formulas (so scoring depends on recalculation); 17251 and 39180 compute values in Python.
"""

CORRECT = {
    "37609": '''import sys, openpyxl
wb = openpyxl.load_workbook(sys.argv[1])
ws = wb["Sheet2"]
for r in range(2, 12):
    ws[f"C{r}"] = f'=IF(OR(N(A{r})>=7,N(B{r})>=7),"e","-")'
wb.save(sys.argv[2])
''',
    "17251": '''import sys, openpyxl
wb = openpyxl.load_workbook(sys.argv[1])
ws = wb.active
rows = range(2, 12)
for r in rows:
    part, price = ws[f"A{r}"].value, ws[f"B{r}"].value
    ws[f"C{r}"] = 1 + sum(1 for o in rows if ws[f"A{o}"].value == part and ws[f"B{o}"].value < price)
wb.save(sys.argv[2])
''',
    "39180": '''import sys, openpyxl
wb = openpyxl.load_workbook(sys.argv[1])
ws = wb.active
wanted = {ws[f"C{r}"].value for r in range(3, 58) if ws[f"C{r}"].value not in (None, "")}
ws["C2"] = sum(ws[f"B{r}"].value or 0 for r in range(3, 58) if ws[f"A{r}"].value in wanted)
wb.save(sys.argv[2])
''',
}

# Each differs from the correct program in one detail.
SUBTLY_WRONG = {
    # ">" instead of ">=": a 7 no longer counts
    "37609": CORRECT["37609"].replace(">=7", ">7"),
    # ranks by price over all parts instead of within the same part
    "17251": CORRECT["17251"].replace('ws[f"A{o}"].value == part and ', ""),
    # sums the same row's B whenever C is filled, instead of looking the C names up in column A
    "39180": '''import sys, openpyxl
wb = openpyxl.load_workbook(sys.argv[1])
ws = wb.active
ws["C2"] = sum(ws[f"B{r}"].value or 0 for r in range(3, 58) if ws[f"C{r}"].value not in (None, ""))
wb.save(sys.argv[2])
''',
}
