"""The fact tables the demo domain answers from (small, fixed, and spoken-friendly)."""
from __future__ import annotations

# country: (capital, language, currency, continent)
COUNTRIES = {
    "France": ("Paris", "French", "the euro", "Europe"),
    "Germany": ("Berlin", "German", "the euro", "Europe"),
    "Spain": ("Madrid", "Spanish", "the euro", "Europe"),
    "Italy": ("Rome", "Italian", "the euro", "Europe"),
    "Portugal": ("Lisbon", "Portuguese", "the euro", "Europe"),
    "Greece": ("Athens", "Greek", "the euro", "Europe"),
    "Poland": ("Warsaw", "Polish", "the zloty", "Europe"),
    "Sweden": ("Stockholm", "Swedish", "the krona", "Europe"),
    "Norway": ("Oslo", "Norwegian", "the krone", "Europe"),
    "Finland": ("Helsinki", "Finnish", "the euro", "Europe"),
    "Ireland": ("Dublin", "English", "the euro", "Europe"),
    "Austria": ("Vienna", "German", "the euro", "Europe"),
    "Hungary": ("Budapest", "Hungarian", "the forint", "Europe"),
    "Egypt": ("Cairo", "Arabic", "the pound", "Africa"),
    "Kenya": ("Nairobi", "Swahili", "the shilling", "Africa"),
    "Morocco": ("Rabat", "Arabic", "the dirham", "Africa"),
    "Nigeria": ("Abuja", "English", "the naira", "Africa"),
    "Japan": ("Tokyo", "Japanese", "the yen", "Asia"),
    "China": ("Beijing", "Chinese", "the yuan", "Asia"),
    "India": ("New Delhi", "Hindi", "the rupee", "Asia"),
    "Thailand": ("Bangkok", "Thai", "the baht", "Asia"),
    "Vietnam": ("Hanoi", "Vietnamese", "the dong", "Asia"),
    "Turkey": ("Ankara", "Turkish", "the lira", "Asia"),
    "Canada": ("Ottawa", "English", "the dollar", "North America"),
    "Mexico": ("Mexico City", "Spanish", "the peso", "North America"),
    "Cuba": ("Havana", "Spanish", "the peso", "North America"),
    "Brazil": ("Brasilia", "Portuguese", "the real", "South America"),
    "Argentina": ("Buenos Aires", "Spanish", "the peso", "South America"),
    "Peru": ("Lima", "Spanish", "the sol", "South America"),
    "Chile": ("Santiago", "Spanish", "the peso", "South America"),
    "Australia": ("Canberra", "English", "the dollar", "Oceania"),
    "New Zealand": ("Wellington", "English", "the dollar", "Oceania"),
}

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
MONTH_DAYS = dict(zip(MONTHS, (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)))

OPPOSITES = {
    "hot": "cold", "big": "small", "fast": "slow", "happy": "sad", "light": "dark", "up": "down",
    "open": "closed", "early": "late", "loud": "quiet", "full": "empty", "old": "new",
    "strong": "weak", "rich": "poor", "wet": "dry", "hard": "soft", "long": "short",
}
ANIMAL_SOUNDS = {
    "cow": "moo", "dog": "woof", "cat": "meow", "duck": "quack", "sheep": "baa", "owl": "hoot",
    "pig": "oink", "frog": "ribbit", "horse": "neigh", "rooster": "cock a doodle doo",
    "mouse": "squeak", "lion": "roar",
}
SPELL_WORDS = ("apple", "banana", "coffee", "garden", "window", "yellow", "kitchen", "music",
               "pencil", "river", "orange", "purple", "summer", "winter", "doctor", "letter",
               "bottle", "pillow", "rocket", "castle")
COLORS = {"sky": "blue", "grass": "green", "snow": "white", "a banana": "yellow",
          "a tomato": "red", "coal": "black", "an orange": "orange", "a lemon": "yellow",
          "chocolate": "brown", "a carrot": "orange"}

TIME_UNITS = ("seconds", "minutes", "hours")
# unit: (target unit, factor): conversions by a power of ten, so held-out values stay computable
# by the pattern "append zeros"; the others are learned as a table.
DECIMAL_CONVERSIONS = {
    "kilometers": ("meters", 1000), "meters": ("centimeters", 100), "centimeters": ("millimeters", 10),
    "kilograms": ("grams", 1000), "liters": ("milliliters", 1000),
}
TABLE_CONVERSIONS = {
    "hours": ("minutes", 60), "minutes": ("seconds", 60), "days": ("hours", 24), "weeks": ("days", 7),
}
CLOCK_TIMES = tuple(f"{h} {m}" for h in range(1, 13) for m in ("o'clock", "thirty", "fifteen", "forty five"))
TASKS = ("call mom", "water the plants", "take out the trash", "buy milk", "feed the cat",
         "check the oven", "send the report", "walk the dog", "pay the bills", "book a table",
         "pick up the kids", "charge my phone", "drink some water", "stretch", "lock the door",
         "call the dentist")
TIMER_LABELS = ("the pasta", "the eggs", "my tea", "the laundry", "my workout", "the bread",
                "a break", "the rice")
