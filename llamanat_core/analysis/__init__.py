"""The analysis layer: the statistics (`stats`, `sequential`, `paired`, `families`), the
study's comparisons and their verdicts (`comparisons`, `text_comparisons`, `text_design` and
its check, `sensitivity`, `solve_times`, `study_wide`, `two_stage`), the verdicts in words and
tables (`decision_tables`, `scorecard`, `report`: the numbers and sentences the prose reads)
and the earlier published study's scoring (`replication`). It may import the core, the
model, data and training layers and the study; never the book or the command line."""
