"""Update baselines the paper compares RASU with, each through its own package: GEPA (`gepa`) and TextGrad
(`textgrad`). Both are driven over raso's Harness protocol and call models only through raso's gateway."""
