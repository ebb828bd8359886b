"""Package data shipped with Foresay (prompts, icons, small models); read with importlib.resources."""
