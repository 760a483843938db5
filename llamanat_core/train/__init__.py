"""The training layer: the plain reference loop (`loop`: `Budget`, `PlainStep`, `setup`,
`fit`, scoring), the compiled step proven equal to it (`compiled`), training on text
(`text`), AdamW's settings (`optim`), the one learning-rate schedule (`schedule`) and text
generated through the KV cache (`sampling`). It may import the core, the model layer and the
data layer; never the study, the analysis or the book."""
