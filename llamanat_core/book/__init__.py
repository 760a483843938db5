"""The book layer: what the chapters call to show and check the study. The figures
(`plotting/`), one helper module per chapter for its own small measurements (`helpers/`),
the decoder's diagram (`diagram`), inside trained models (`mechanism`, `inside`), the guard of
every conclusion (`claims`), the chapter runner (`execute`: papermill, sanitised outputs) and
the Sphinx extension that keeps the book offline (`book_ext`). It may import every layer
below (core, model, data, training, study, analysis); only the command line imports it."""
