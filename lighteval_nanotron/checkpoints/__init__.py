"""Reading Nanotron checkpoint folders: what they hold (`format`) and whether their weights are whole (`integrity`)."""
