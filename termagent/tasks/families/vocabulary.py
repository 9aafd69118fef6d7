"""The shared vocabulary of the generated task families: every file, directory and content word of an
instance is drawn from these pools; scripts/first_turn.py counts the ones a reply copies from its task.
Data only: no import."""

WORDS = ("amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
         "kelp", "lumen", "maple", "nectar", "onyx", "pepper", "quartz", "raven", "saffron", "tundra",
         "umber", "violet", "willow", "xenon", "yarrow", "zephyr", "atlas", "breeze", "comet", "dune",
         "falcon", "glacier", "hazel", "iris", "jasper", "koala", "lotus", "meadow", "nimbus", "orchid",
         "pebble", "quill", "ripple", "sierra", "thistle", "urchin", "vortex", "walnut", "yonder", "zinnia")
EXTS = ("txt", "log", "csv", "md", "conf", "dat", "json", "ini")
CITIES = ("oslo", "lima", "kyoto", "cairo", "quito", "perth", "dakar", "hanoi", "porto", "riga",
          "sofia", "tunis", "accra", "bern", "dublin", "malmo")
PEOPLE = ("alice", "bruno", "chen", "dara", "emil", "farah", "gita", "hugo", "ines", "jonas", "kira",
          "liam", "mona", "nils", "olga", "pablo", "qadir", "rosa", "sven", "tara", "ugo", "vera")
LEVELS = ("INFO", "WARN", "ERROR", "DEBUG")
