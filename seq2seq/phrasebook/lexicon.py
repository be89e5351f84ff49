"""The bilingual lexicon of the phrasebook corpus (English→French), as compact tables.

Parsed once, on first use, by ``lexicon()``. Formats (fields separated by ``;``):

- nouns: ``en sg; en pl; fr sg; fr pl; gender; tags; prepositions; links``. ``links``
  are Pharaoh links between the noun's own English and French tokens (``i-j`` sure,
  ``i?j`` possible); empty means ``0-0`` for one-word nouns and every pair otherwise.
  Tags choose which verbs and adjectives fit; prepositions which locative phrases it
  heads.
- verbs: ``en base:3sg:past:participle (or just the base); fr present (6 forms) or a
  regular -er infinitive; fr participle (empty for -er); object tags``.
- adjectives: ``en; fr ms fs mp fp; position (pre|post); ms form before a vowel; noun
  tags``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

NOUNS = """
notebook;notebooks;carnet;carnets;m;small read open;on under near;
book;books;livre;livres;m;small read open;;
letter;letters;lettre;lettres;f;small read write open;;
newspaper;newspapers;journal;journaux;m;small read;;
magazine;magazines;magazine;magazines;m;small read;;
report;reports;rapport;rapports;m;small read write;;
key;keys;clé;clés;f;small;;
bag;bags;sac;sacs;m;small open container;in under near behind;
box;boxes;boîte;boîtes;f;small open container;in on under near behind next;
umbrella;umbrellas;parapluie;parapluies;m;small open;;
pen;pens;stylo;stylos;m;small;;
pencil;pencils;crayon;crayons;m;small;;
cup;cups;tasse;tasses;f;small;;
glass;glasses;verre;verres;m;small;;
bottle;bottles;bouteille;bouteilles;f;small open;;
phone;phones;téléphone;téléphones;m;small fix;;
computer;computers;ordinateur;ordinateurs;m;small fix;near next;
watch;watches;montre;montres;f;small fix;;
lamp;lamps;lampe;lampes;f;small fix;near under next;
bicycle;bicycles;vélo;vélos;m;big fix;near behind next;
car;cars;voiture;voitures;f;big fix open container;in near behind next;
ticket;tickets;billet;billets;m;small;;
map;maps;carte;cartes;f;small read;;
photo;photos;photo;photos;f;small;;
door;doors;porte;portes;f;fixed open fix;near behind front;
window;windows;fenêtre;fenêtres;f;fixed open fix;near under front;
table;tables;table;tables;f;furniture fix;on under near next;
chair;chairs;chaise;chaises;f;furniture fix;on under near behind next;
desk;desks;bureau;bureaux;m;furniture;on under near behind next;
shelf;shelves;étagère;étagères;f;furniture;on under near;
bed;beds;lit;lits;m;furniture;on under near next;
sofa;sofas;canapé;canapés;m;furniture;on under behind near next;
drawer;drawers;tiroir;tiroirs;m;fixed open container;in;
cupboard;cupboards;placard;placards;m;fixed open container;in on near next;
apple;apples;pomme;pommes;f;food small;;
cake;cakes;gâteau;gâteaux;m;food;;
sandwich;sandwiches;sandwich;sandwichs;m;food small;;
orange;oranges;orange;oranges;f;food small;;
egg;eggs;œuf;œufs;m;food small;;
pie;pies;tarte;tartes;f;food;;
coffee;coffees;café;cafés;m;drink;;
tea;teas;thé;thés;m;drink;;
meeting room;meeting rooms;salle de réunion;salles de réunion;f;room;in near;1-0 0-2 0?1
waiting room;waiting rooms;salle d'attente;salles d'attente;f;room;in near;1-0 0-1
dining room;dining rooms;salle à manger;salles à manger;f;room;in;1-0 0-2 0?1
hotel room;hotel rooms;chambre d'hôtel;chambres d'hôtel;f;room;in;1-0 0-1
kitchen table;kitchen tables;table de cuisine;tables de cuisine;f;furniture;\
on under near;1-0 0-2 0?1
coffee cup;coffee cups;tasse à café;tasses à café;f;small;;1-0 0-2 0?1
train ticket;train tickets;billet de train;billets de train;m;small;;1-0 0-2 0?1
bus stop;bus stops;arrêt de bus;arrêts de bus;m;stop;at near;1-0 0-2 0?1
birthday cake;birthday cakes;gâteau d'anniversaire;gâteaux d'anniversaire;m;food;;\
1-0 0-1
history book;history books;livre d'histoire;livres d'histoire;m;small read open;;1-0 0-1
phone number;phone numbers;numéro de téléphone;numéros de téléphone;m;info;;1-0 0-2 0?1
apple juice;apple juices;jus de pomme;jus de pomme;m;drink;;1-0 0-2 0?1
car key;car keys;clé de voiture;clés de voiture;f;small;;1-0 0-2 0?1
office chair;office chairs;chaise de bureau;chaises de bureau;f;furniture fix;on near;\
1-0 0-2 0?1
tennis ball;tennis balls;balle de tennis;balles de tennis;f;small;;1-0 0-2 0?1
post office;post offices;bureau de poste;bureaux de poste;m;building;in at near front;\
1-0 0-2 0?1
living room;living rooms;salon;salons;m;room;in;
bathroom;bathrooms;salle de bain;salles de bain;f;room;in;
classroom;classrooms;salle de classe;salles de classe;f;room;in near;
kitchen;kitchens;cuisine;cuisines;f;room;in;
bedroom;bedrooms;chambre;chambres;f;room;in;
office;offices;bureau;bureaux;m;room;in near;
garage;garages;garage;garages;m;room;in near behind;
station;stations;gare;gares;f;building;in at near behind front;
school;schools;école;écoles;f;building;in at near behind front;
hospital;hospitals;hôpital;hôpitaux;m;building;in at near front;
museum;museums;musée;musées;m;building;in at near behind front;
bank;banks;banque;banques;f;building;in at near front;
market;markets;marché;marchés;m;building;at near behind;
library;libraries;bibliothèque;bibliothèques;f;building;in at near behind front;
church;churches;église;églises;f;building;in near behind front;
airport;airports;aéroport;aéroports;m;building;in at near;
hotel;hotels;hôtel;hôtels;m;building;in at near behind front;
restaurant;restaurants;restaurant;restaurants;m;building;in at near behind front;
cinema;cinemas;cinéma;cinémas;m;building;in at near behind front;
bakery;bakeries;boulangerie;boulangeries;f;building;in at near front;
pharmacy;pharmacies;pharmacie;pharmacies;f;building;in at near front;
supermarket;supermarkets;supermarché;supermarchés;m;building;in at near behind front;
garden;gardens;jardin;jardins;m;outdoor;in near behind;
park;parks;parc;parcs;m;outdoor;in near;
street;streets;rue;rues;f;outdoor;in;
beach;beaches;plage;plages;f;outdoor;on near;
teacher;teachers;professeur;professeurs;m;person;;
doctor;doctors;médecin;médecins;m;person;;
student;students;étudiant;étudiants;m;person;;
girl;girls;fille;filles;f;person;;
boy;boys;garçon;garçons;m;person;;
woman;women;femme;femmes;f;person;;
man;men;homme;hommes;m;person;;
child;children;enfant;enfants;m;person;;
neighbour;neighbours;voisin;voisins;m;person;;
friend;friends;ami;amis;m;person;;
sister;sisters;sœur;sœurs;f;person;;
brother;brothers;frère;frères;m;person;;
mother;mothers;mère;mères;f;person;;
father;fathers;père;pères;m;person;;
baby;babies;bébé;bébés;m;person;;
waiter;waiters;serveur;serveurs;m;person;;
driver;drivers;chauffeur;chauffeurs;m;person;;
nurse;nurses;infirmière;infirmières;f;person;;
lawyer;lawyers;avocat;avocats;m;person;;
engineer;engineers;ingénieur;ingénieurs;m;person;;
singer;singers;chanteur;chanteurs;m;person;;
baker;bakers;boulanger;boulangers;m;person;;
police officer;police officers;policier;policiers;m;person;;
"""

VERBS = """
see:sees:saw:seen;vois vois voit voyons voyez voient;vu;\
small big fixed furniture person building
love;aimer;;person small
leave:leaves:left:left;laisser;;small
find:finds:found:found;trouver;;small big person info
take:takes:took:taken;prends prends prend prenons prenez prennent;pris;small
buy:buys:bought:bought;achète achètes achète achetons achetez achètent;acheté;\
small big food furniture
sell:sells:sold:sold;vends vends vend vendons vendez vendent;vendu;small big furniture
lose:loses:lost:lost;perds perds perd perdons perdez perdent;perdu;small info
read:reads:read:read;lis lis lit lisons lisez lisent;lu;read
write:writes:wrote:written;écris écris écrit écrivons écrivez écrivent;écrit;write
open;ouvre ouvres ouvre ouvrons ouvrez ouvrent;ouvert;open
close;fermer;;open
clean;nettoie nettoies nettoie nettoyons nettoyez nettoient;nettoyé;\
big fixed furniture room
paint;peins peins peint peignons peignez peignent;peint;fixed furniture room
carry:carries:carried:carried;porter;;small
bring:brings:brought:brought;apporter;;small food
forget:forgets:forgot:forgotten;oublier;;small info person
wait for:waits for:waited for:waited for;\
attends attends attend attendons attendez attendent;attendu;person
help;aider;;person
call;appelle appelles appelle appelons appelez appellent;appelé;person
invite;inviter;;person
know:knows:knew:known;connais connais connaît connaissons connaissez connaissent;\
connu;person
meet:meets:met:met;rencontrer;;person
visit;visiter;;building
listen to;écouter;;person
look for;chercher;;small person info
watch;regarder;;person big
follow;suis suis suit suivons suivez suivent;suivi;person
hear:hears:heard:heard;entends entends entend entendons entendez entendent;entendu;\
person
eat:eats:ate:eaten;manger;;food
cook;préparer;;food
drink:drinks:drank:drunk;bois bois boit buvons buvez boivent;bu;drink
choose:chooses:chose:chosen;\
choisis choisis choisit choisissons choisissez choisissent;choisi;small food furniture
finish;finis finis finit finissons finissez finissent;fini;write food
repair;réparer;;fix
use;utiliser;;small fix
"""

INTRANSITIVE = """
work;travailler
sleep:sleeps:slept:slept;dors dors dort dormons dormez dorment;dormi
sing:sings:sang:sung;chanter
dance;danser
eat:eats:ate:eaten;manger
read:reads:read:read;lis lis lit lisons lisez lisent;lu
play;jouer
cook;cuisiner
"""

ADJECTIVES = """
small;petit petite petits petites;pre;;small big furniture room building outdoor
big;grand grande grands grandes;pre;;small big furniture room building outdoor
beautiful;beau belle beaux belles;pre;bel;small big furniture room building outdoor
new;nouveau nouvelle nouveaux nouvelles;pre;nouvel;small big furniture room building
old;vieux vieille vieux vieilles;pre;vieil;small big furniture building person
young;jeune jeune jeunes jeunes;pre;;person
pretty;joli jolie jolis jolies;pre;;small furniture room outdoor
blue;bleu bleue bleus bleues;post;;small big fixed furniture room building
green;vert verte verts vertes;post;;small big fixed furniture room building
black;noir noire noirs noires;post;;small big fixed furniture
white;blanc blanche blancs blanches;post;;small big fixed furniture room building
red;rouge rouge rouges rouges;post;;small big fixed furniture building
yellow;jaune jaune jaunes jaunes;post;;small big fixed furniture room building
grey;gris grise gris grises;post;;small big fixed furniture building
heavy;lourd lourde lourds lourdes;post;;small furniture
empty;vide vide vides vides;post;;container room
broken;cassé cassée cassés cassées;post;;fix
clean;propre propre propres propres;post;;small furniture room
expensive;cher chère chers chères;post;;small big furniture food
happy;content contente contents contentes;post;;person
tired;fatigué fatiguée fatigués fatiguées;post;;person
busy;occupé occupée occupés occupées;post;;person
quiet;calme calme calmes calmes;post;;room person outdoor
dark;sombre sombre sombres sombres;post;;room
cold;froid froide froids froides;post;;food drink room
hot;chaud chaude chauds chaudes;post;;food drink
wooden;en_bois en_bois en_bois en_bois;post;;small furniture fixed
"""

NAMES = """
Felix m; Marie f; Anna f; Tom m; Lucas m; Sophie f; Hugo m; Emma f; Paul m; Julia f;
Oscar m; Nina f; Leo m; Clara f; Max m; Lina f; Adam m; Sarah f; Victor m; Alice f;
Noah m; Chloe f; Ethan m; Laura f; Samuel m; Eva f; David m; Zoe f; Martin m; Mila f;
Simon m; Ines f; Arthur m; Rosa f; Karim m; Yasmin f; Igor m; Olga f; Kenji m; Amara f
"""


@dataclass(frozen=True)
class Noun:
    en: tuple[tuple[str, ...], tuple[str, ...]]  # singular, plural tokens
    fr: tuple[tuple[str, ...], tuple[str, ...]]
    gender: str  # "m" | "f"
    tags: frozenset[str]
    preps: tuple[str, ...]
    links: tuple[tuple[int, int, bool], ...]  # (en, fr, sure) within the noun


@dataclass(frozen=True)
class Verb:
    en: tuple[str, str, str, str]  # base, 3sg, past, participle (may hold a particle)
    fr: tuple[str, ...]  # present: je tu il nous vous ils
    participle: str
    tags: frozenset[str]


@dataclass(frozen=True)
class Adjective:
    en: str
    fr: tuple[str, str, str, str]  # ms fs mp fp ("_" joins multi-word forms)
    pre: bool
    vowel_form: str  # masculine singular before a vowel ("" when the same)
    tags: frozenset[str]


@dataclass(frozen=True)
class Lexicon:
    nouns: tuple[Noun, ...]
    verbs: tuple[Verb, ...]
    intransitive: tuple[Verb, ...]
    adjectives: tuple[Adjective, ...]
    names: tuple[tuple[str, str], ...]  # (name, gender)


def _links(spec: str, n_en: int, n_fr: int) -> tuple[tuple[int, int, bool], ...]:
    if not spec:
        return tuple((i, j, True) for i in range(n_en) for j in range(n_fr))
    out = []
    for link in spec.split():
        sep = "-" if "-" in link else "?"
        i, j = link.split(sep)
        out.append((int(i), int(j), sep == "-"))
    return tuple(out)


def _noun(line: str) -> Noun:
    en_sg, en_pl, fr_sg, fr_pl, gender, tags, preps, links = line.split(";")
    en = (tuple(en_sg.split()), tuple(en_pl.split()))
    fr = (tuple(fr_sg.split()), tuple(fr_pl.split()))
    return Noun(
        en, fr, gender, frozenset(tags.split()), tuple(preps.split()),
        _links(links, len(en[0]), len(fr[0])),
    )  # fmt: skip


def _english(spec: str) -> tuple[str, str, str, str]:
    if ":" in spec:
        base, third, past, participle = spec.split(":")
        return base, third, past, participle
    head, _, particle = spec.partition(" ")
    if head.endswith(("s", "sh", "ch", "x", "o")):
        third = head + "es"
    elif head.endswith("y") and head[-2] not in "aeiou":
        third = head[:-1] + "ies"
    else:
        third = head + "s"
    past = head + "d" if head.endswith("e") else head + "ed"
    rest = f" {particle}" if particle else ""
    return spec, third + rest, past + rest, past + rest


def _verb(line: str, tags: str = "") -> Verb:
    fields = line.split(";")
    en = _english(fields[0])
    french, participle = fields[1], fields[2] if len(fields) > 2 else ""
    if " " not in french:  # a regular -er infinitive
        stem = french[:-2]
        plural = stem + "eons" if stem.endswith("g") else stem + "ons"
        forms = (stem + "e", stem + "es", stem + "e", plural, stem + "ez", stem + "ent")
        participle = participle or stem + "é"
    else:
        forms = tuple(french.split())
    tags = fields[3] if len(fields) > 3 else tags
    return Verb(en, forms, participle, frozenset(tags.split()))


def _adjective(line: str) -> Adjective:
    en, forms, position, vowel_form, tags = line.split(";")
    ms, fs, mp, fp = forms.split()
    return Adjective(
        en, (ms, fs, mp, fp), position == "pre", vowel_form, frozenset(tags.split())
    )


def _lines(table: str) -> list[str]:
    return [line.strip() for line in table.strip().splitlines() if line.strip()]


@cache
def lexicon() -> Lexicon:
    """The parsed tables (cached)."""
    names = tuple(tuple(item.split()) for item in NAMES.replace("\n", " ").split(";"))
    return Lexicon(
        nouns=tuple(_noun(line) for line in _lines(NOUNS)),
        verbs=tuple(_verb(line) for line in _lines(VERBS)),
        intransitive=tuple(_verb(line) for line in _lines(INTRANSITIVE)),
        adjectives=tuple(_adjective(line) for line in _lines(ADJECTIVES)),
        names=names,  # type: ignore[arg-type]
    )
