"""A varied English text corpus for the motion training data, generated from a seed.

Hand-written sentences (phonetically balanced in the manner of the Harvard lists,
plus the assistant-style talk the avatar mostly speaks) and template sentences over
word lists that load the visemes that matter most: p/b/m, f/v, rounded and open vowels.
"""

from __future__ import annotations

import numpy as np

SENTENCES = """\
The birch canoe slid on the smooth planks.
Glue the sheet to the dark blue background.
It is easy to tell the depth of a well.
These days a chicken leg is a rare dish.
Rice is often served in round bowls.
The juice of lemons makes fine punch.
The box was thrown beside the parked truck.
The hogs were fed chopped corn and garbage.
Four hours of steady work faced us.
A large size in stockings is hard to sell.
The boy was there when the sun rose.
A rod is used to catch pink salmon.
The source of the huge river is the clear spring.
Kick the ball straight and follow through.
Help the woman get back to her feet.
A pot of tea helps to pass the evening.
Smoky fires lack flame and heat.
The soft cushion broke the man's fall.
The salt breeze came across from the sea.
The girl at the booth sold fifty bonds.
The small pup gnawed a hole in the sock.
The fish twisted and turned on the bent hook.
Press the pants and sew a button on the vest.
The swan dive was far short of perfect.
The beauty of the view stunned the young boy.
Two blue fish swam in the tank.
Her purse was full of useless trash.
The colt reared and threw the tall rider.
It snowed, rained, and hailed the same morning.
Read verse out loud for pleasure.
Hello, how can I help you today?
Sure, I can book that for you. Which day works best?
I'm sorry, I didn't quite catch that. Could you say it again?
Your package should arrive by Monday morning.
The meeting moved to three pm in the main room.
Let me pull up your booking. One moment please.
Maybe we should bump the budget by five percent.
My mom baked a big blueberry pie for the party.
Please remember to bring the map and a warm jumper.
We will probably be back before the movie begins.
The weather tomorrow looks windy, with a few showers.
Would you like me to play some music while you wait?
Thank you for your patience. Your problem is fixed.
Bob bought a bike, but Pam prefers to walk.
Move the blue box up by the window.
Five very vivid photographs were found in the van.
Who knew the moon would look so huge tonight?
Oh no, the phone fell off the bar and broke.
Papa made a pumpkin soup with bread and butter.
Open the map, pick a place, and we'll plan the trip.
Whatever happens, we keep moving forward.
Ask not what your country can do for you.
The quick brown fox jumps over the lazy dog.
Pack my box with five dozen liquor jugs.
Every member of the board voted by email.
I'm happy to explain how the payment plan works.
Is it possible to meet a bit earlier, maybe at nine?
Umbrellas are a must in the month of May.
Probably the best approach is to improve the basics first.
A warm bath before bed improves my mood.
""".splitlines()

SUBJECTS = ("my brother", "the pilot", "a mob of people", "Paul", "Maria", "the baby", "your boss", "we", "the boy",
            "the members", "a poet", "Bill and Pam", "the farmer", "my friend", "the robot", "Mabel")
VERBS = ("bought", "moved", "pushed", "played with", "pulled", "watched", "phoned", "built", "painted", "opened",
         "grabbed", "found", "saw", "brought", "fed", "hummed about", "wanted", "owned", "put away", "loved")
OBJECTS = ("a purple bubble", "the map", "five big boxes", "the blue pump", "a warm blanket", "some fresh bread",
           "the heavy book", "a pair of boots", "the broom", "a moped", "the bamboo boat", "a bowl of soup",
           "the old violin", "an apple pie", "the umbrella", "a woolly hat", "the morning paper", "my phone")
PLACES = ("by the pool", "up the hill", "in the barn", "before noon", "at the bus stop", "over the bridge",
          "on Monday", "after the ball", "beneath the palm", "by the beach", "near the mall", "in the woods")
OPENERS = ("", "", "", "Well, ", "Oh, ", "Maybe ", "Probably ", "Yesterday ", "By morning ", "Oh boy, ")


def sentence(rng: np.random.Generator) -> str:
    """One sentence: hand-written a third of the time, templated otherwise."""
    if rng.random() < 0.35:
        return SENTENCES[rng.integers(len(SENTENCES))]
    pick = lambda words: words[rng.integers(len(words))]  # noqa: E731
    text = f"{pick(OPENERS)}{pick(SUBJECTS)} {pick(VERBS)} {pick(OBJECTS)} {pick(PLACES)}"
    ending = "?" if rng.random() < 0.2 else "."
    return text[0].upper() + text[1:] + ending
