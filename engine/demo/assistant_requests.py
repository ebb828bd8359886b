"""Requests people make of a voice assistant, beyond the demo domain: commands, questions, read
sentences and digit strings, from two words to about twenty-five.

` | ` marks a phrase boundary, where a speaker may stop to think ("remind me to call the
dentist | tomorrow at nine"); it is not part of the text. Digits are written as digits, one per
digit spoken ("4 1 5"); a voice reads them one by one.
"""
from __future__ import annotations

PHRASE_BREAK = " | "

REQUESTS: tuple[str, ...] = (
    # commands
    "Stop the music.",
    "Turn off the kitchen lights.",
    "Set an alarm | for six thirty tomorrow morning.",
    "Remind me to call the dentist | tomorrow at nine.",
    "Play something relaxing | from my evening playlist.",
    "Add milk, eggs and a loaf of bread | to the shopping list.",
    "Send a message to Laura | saying I will be ten minutes late.",
    "Turn the heating up | by two degrees in the living room.",
    "Cancel my three o'clock meeting | and let everyone know.",
    "Skip this song.",
    "Open the garage door.",
    "Read me my unread emails | from this morning.",
    "Book a table for four | at the Thai place on Friday evening.",
    "Pause the podcast | and remind me where I stopped.",
    "Call my brother | on his mobile.",
    "Start a timer | for twenty five minutes.",
    "Move my dentist appointment | to next Thursday afternoon.",
    "Lock the front door | and switch off every light downstairs.",
    "Share my location with Sam | until I get home.",
    "Order the same pizza as last time | but without olives.",
    # questions
    "What time is it in Tokyo?",
    "How long will it take | to drive to the airport right now?",
    "Is it going to rain | this afternoon?",
    "What is the capital of Australia?",
    "How many grams of sugar | are in a tablespoon of honey?",
    "Who wrote the novel | Pride and Prejudice?",
    "When does the next train | to Cambridge leave?",
    "What was the final score | of last night's football match?",
    "Can you explain how a heat pump works | in simple terms?",
    "How far is the moon | from the earth?",
    "What should I cook tonight | with chicken, rice and spinach?",
    "Which pharmacy near me | is still open after ten?",
    "Why is the sky blue?",
    "How do I say thank you very much | in Japanese?",
    "What is on my calendar | for the rest of the week?",
    # read sentences and longer requests
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells | by the sea shore on sunny afternoons.",
    "Please write down that the meeting with the architects | went well and they will send new drawings on Monday.",
    "I would like to know whether the museum is open on public holidays | and how much the tickets cost for two adults.",
    "The old lighthouse stood on the edge of the cliff, | its lamp long since gone dark.",
    "Tell my team that the report is finished | and that I have put it in the shared folder.",
    "A gentle breeze carried the smell of fresh bread | through the narrow streets of the village.",
    "Find me a recipe for a vegetarian lasagne | that takes less than an hour to make.",
    "Could you summarise the news headlines | about the climate conference in a few sentences?",
    "We left the house early in the morning | and walked along the river until we reached the bridge.",
    "Draft a reply to the landlord | saying the boiler has been fixed and thanking him for his help.",
    "Every evening my grandmother read us a story | before turning off the lamp beside the bed.",
    "Look up the opening hours of the library | and add a reminder to return my books on Saturday.",
    # digit strings
    "Call 0 7 7 0 0 | 9 0 0 4 6 1.",
    "My PIN is 4 7 2 9.",
    "Transfer 250 pounds | to account 3 1 8 8 6 0 2 4.",
    "Our gate number is 2 9.",
    "Dial 5 5 5 | 0 1 9 9.",
    "My postcode is 9 4 1 1 0.",
    "Set the thermostat to 21 degrees.",
    "The tracking code is 7 3 | 4 4 0 | 1 8 2 5.",
    "Add 3 apples and 12 oranges | to the order.",
    "Wake me up at 6 45.",
    "My booking reference is 8 8 3 | 1 0 5 7.",
    "Remind me on the 14th of March | to renew my passport.",
)


def spoken_text(request: str) -> str:
    """The request as said, without its phrase-break mark."""
    return " ".join(request.replace("|", " ").split())


def break_index(request: str) -> int | None:
    """After how many words the request's first phrase break comes (None: it has none)."""
    head, sep, _ = request.partition("|")
    return len(head.split()) if sep else None
