"""The learning rate: the LR frontier (scaling's contract), LR transfer by law, stability."""
