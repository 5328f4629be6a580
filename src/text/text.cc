// Anchor of the text library (tokenizer and chat format live beside it).
