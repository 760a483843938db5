"""Small measurements a chapter runs live on random or trained weights (one module per chapter)."""
