"""One module per chapter, named by the chapter, for its own small measurements on random or
trained weights: plain data, no file written, no figure drawn, no sentence written. Part of
the book layer: it may import the layers below and the book's own modules."""
