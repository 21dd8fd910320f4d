"""Real word lists for the synthetic corpora, roughly in order of frequency (coined words extend
them: ``synth.coining``)."""

from __future__ import annotations


def words_of(text: str) -> list[str]:
    """Whitespace-separated words, first occurrence kept, order preserved."""
    return list(dict.fromkeys(text.split()))


def bars(text: str) -> list[str]:
    """``|``-separated items, repeats and empty ones kept (some items hold or are spaces)."""
    return text.split("|")


OWT_COMMON = words_of(
    """
    the of and to a in is that for it as was with be by on not he I this are or his from at which
    but have an they you were her she there been one all we their has would when if so no will more
    can out up who them some what about said its into time than my only other new also two people
    like then these first could years any over after most may now just year made where much way many
    very did should back those even because well through before being three how our get world make
    between life day work both down own last here while good right see game team still government
    since great know around think say used long part off same number each high does another such
    going public under use go week school few found place home percent old city want season take need
    police company during every best without including little four five end million system several
    told until group help country show man next often although against university us called family
    point report according later health data second law set program local early among come away
    within left national political president business house things look something federal court war
    water power less money however might never days small put big side others came top past free
    already support again general case major too better real open per policy music story full market
    possible social rather series whether community student order lot film students making least
    women men children feel head development though information young research months history control
    having thing process almost half along known name below above today taking across move yet nothing
    far study area six enough keep started likely issue economic become once project level member
    private try form hard question close human job believe either food cost plan security fact means
    change got why really must lead players player games play going went took gave began seemed asked
    called based given shown held seen known become million billion percent dollars state states
    service services office officials official department military army forces attack death killed
    according reported including continue continued include includes provide provided making move
    moved return led let live living lives love went woman child children parents mother father son
    daughter wife husband friend friends member members leader leaders party parties vote votes voters
    election campaign candidate republican democratic senate congress bill rights freedom justice
    president minister prime foreign international global economy economic growth financial financial
    bank banks tax taxes trade jobs workers industry price prices cost costs pay paid income rate
    rates interest investment investors stock shares sales revenue profit profits deal deals contract
    technology software internet online digital data users user app apps phone phones computer
    network website site page post posts video videos media social news story stories article report
    reports science scientists study studies research researchers evidence results analysis model
    models energy climate environment environmental oil gas coal carbon emissions nuclear power
    health care medical hospital doctors patients disease drug drugs treatment cancer risk virus
    vaccine food water air land space earth sun light sea river island town village street road car
    cars train plane flight travel trip hotel restaurant coffee beer wine music song songs album band
    movie movies show shows series episode season character characters book books writer author
    art artist design style fashion sport sports football basketball baseball soccer league club
    coach fans win won lose lost match race title championship record score goal goals point points
    school schools teacher teachers students education college class classes course program programs
    church religious god faith culture language history future past present moment minute minutes hour
    hours night morning evening weekend month months today tomorrow yesterday early late recent recently
    young older new old small large big huge great good bad best worst better worse important
    different similar possible impossible likely available able free full simple easy difficult hard
    clear sure certain true false real main key strong weak serious special public private personal
    political economic social cultural human natural local national federal foreign american
    actually probably especially perhaps simply quickly usually finally certainly clearly nearly
    currently already directly exactly generally largely mostly quite rather together instead
    ago soon later often always sometimes never ever almost enough maybe indeed else anyway
    become becomes became bring brings brought build builds built buy bought call calls carry
    cause caused check choose chose come comes coming consider considered create created cut
    decide decided describe described design die died discuss discussed draw drive driving drop
    eat enjoy enter expect expected explain explained face fall fell fight fill finish follow
    following forget forgot gain grow grew grown happen happened hear heard hit hold hope hoped
    improve improved increase increased join joined kill learn learned leave leaving lie listen
    lose losing lost manage meet met miss mention mentioned need needed offer offered pass passed
    pick plan planned prepare prevent produce produced protect protected prove pull push raise
    raised reach reached read reduce reduced refuse release released remain remained remember
    remove removed replace replaced require required respond rise run running save saw seem sell
    send sent serve served share shared sign signed sit speak spoke spend spent stand stay stop
    stopped suggest suggested talk talked tell teach thought throw touch track treat turn turned
    understand wait walk watch wear win wish worry write wrote written
    ability access account action activity address advantage advice age agency agent agreement
    amount animal answer approach argument arm attention audience authority baby bag ball base
    basis battle bed behavior benefit bit blood board boat body box boy brain branch brand budget
    building camera capital career cell center century chance chapter charge chief choice citizen
    claim class client code collection color comment committee competition concern condition
    conference conflict connection context conversation copy corner council couple cover crime
    crisis crowd customer damage deal debate decade decision defense degree demand detail device
    difference difficulty direction director discussion distance doctor dog door dream duty
    effect effort element email employee end enemy engine entry episode equipment error event
    exchange exercise experience expert eye factor failure fall fan farm fear feature fee feeling
    figure file finger fire firm fish floor focus force forest frame friend fund gap garden gas
    gift girl glass goal gold ground growth guard guest guide gun hair hall hand heart heat hell
    help hero hole horse host hotel idea image impact income individual injury input insurance
    interview item key kid kind knowledge lack language leadership letter lie limit link list
    loss luck machine magazine management manager map mark mass material matter meal meaning
    measure meeting memory message method middle mission mistake mix mobile mode moment mouth
    movement nature neck network noise note object opinion opportunity option organization
    owner page pain paper parent partner path pattern peace period person phase photo piece
    pilot pitch planet plant platform pleasure pocket poem position pressure principle prison
    problem product production profile progress property proposal purpose quality quarter race
    radio range reader reality reason region relationship release religion rent request resource
    response rest review reward ring rock role room root rule safety sale sample scale scene
    screen sector self sense sentence sequence session shape shift shop shot sign signal silence
    size skill skin sky sleep slip smile solution son sound source speech speed staff stage star
    status step stone strategy strength stress structure style subject success summer surface
    survey target task taste teacher term test text theory thought threat ticket tool topic
    touch tour tower trade tradition traffic training transfer trial trouble trust truth unit
    version victim view violence voice volume wall weapon weather weight wheel while window
    winter wood word worker writing youth zone active afraid alive alone angry annual aware basic
    beautiful bright broad busy careful central cheap civil classic cold common complete complex
    correct critical cute dangerous dark dead dear deep democratic direct dirty double dry due
    eastern easy effective empty entire environmental equal essential exact excellent existing
    expensive extra extreme fair familiar famous fast fat final fine firm flat foreign formal
    former fresh friendly funny general giant glad global golden grand green guilty happy healthy
    heavy helpful hidden honest hot huge ideal illegal independent initial inner innocent
    interesting internal joint junior kind later leading legal level light limited living lonely
    loose loud lovely low lucky mad massive mental middle minor missing modern moral narrow
    negative nervous nice normal obvious official ordinary original overall perfect physical
    pink plain pleasant poor popular positive powerful pretty previous primary prior professional
    proper proud pure quick quiet rare raw ready recent regular relevant religious remote rich
    right rough round sad safe scared senior sensitive separate severe sharp short sick signal
    significant silly silver single slow smart soft solid southern specific spiritual square
    standard still strange strict structural stupid successful sudden sufficient suitable sweet
    tall technical terrible thick thin tiny tired total tough traditional typical ugly unable
    unique unusual upper urban useful usual valuable various vast visible visual warm weird western
    whole wide wild wise wonderful wooden wrong yellow
    """
)
OWT_COMMON = [w for w in OWT_COMMON if w.islower() or w == "I"]

OWT_NAMES = words_of(
    """
    Trump Obama Clinton America United States New York China Russia Europe California Washington
    London Texas Florida Japan Germany France India Canada Britain Australia Israel Iran Syria Korea
    Mexico Brazil Africa Chicago Paris Google Apple Facebook Twitter Microsoft Amazon Tesla Netflix
    John David Michael James Robert William Mary Sarah Jennifer Elizabeth Smith Johnson Williams Brown
    Jones Miller Davis Wilson Anderson Taylor Thomas Moore Martin Jackson White Harris Thompson Garcia
    Martinez Robinson Clark Lewis Lee Walker Hall Allen Young King Wright Scott Green Baker Adams Nelson
    Hill Campbell Mitchell Roberts Carter Phillips Evans Turner Torres Parker Collins Edwards Stewart
    Morris Murphy Cook Rogers Morgan Peterson Cooper Reed Bailey Bell Gomez Kelly Howard Ward Cox Diaz
    Richardson Wood Watson Brooks Bennett Gray James Reyes Cruz Hughes Price Myers Long Foster Sanders
    Ross Morales Powell Sullivan Russell Ortiz Jenkins Gutierrez Perry Butler Barnes Fisher Henderson
    Coleman Simmons Patterson Jordan Reynolds Hamilton Graham Kim Gonzales Alexander Ramos Wallace
    Griffin West Cole Hayes Chavez Gibson Bryant Ellis Stevens Murray Ford Marshall Owens McDonald
    Harrison Ruiz Kennedy Wells Alvarez Woods Mendoza Castillo Olson Webb Washington Tucker Freeman
    Burns Henry Vasquez Snyder Simpson Crawford Jimenez Porter Mason Shaw Gordon Wagner Hunter Romero
    Hicks Dixon Hunt Palmer Robertson Black Holmes Stone Meyer Boyd Mills Warren Fox Rose Rice Moreno
    Schmidt Patel Ferguson Nichols Herrera Medina Ryan Fernandez Weaver Daniels Stephens Gardner Payne
    Kelley Dunn Pierce Arnold Tran Spencer Peters Hawkins Grant Hansen Castro Hoffman Hart Elliott
    Cunningham Knight Bradley Paul Peter George Mark Steve Chris Brian Kevin Jason Matt Daniel Paul
    Andrew Ryan Josh Emily Jessica Ashley Amanda Laura Lisa Anna Emma Olivia Sophia Linda Susan Karen
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June
    July August September October November December English Christian Muslim Republican Democrat
    Senate House Congress Court Supreme Department Army Navy Ukraine Moscow Beijing Berlin Toronto
    Boston Seattle Atlanta Denver Ohio Virginia Michigan Georgia Pennsylvania Arizona Oregon Iowa
    José Müller François Zoë Gómez Peña Núñez Renée Chloé Björn Øyvind São Paulo Zürich Kraków Łódź
    Dvořák Jürgen Gérard Hélène Ångström Bogotá Medellín Córdoba Málaga Reykjavík Montréal Québec
    """
)

# Capitalised abbreviations: \\p{L}+ keeps them whole, so each is a pre-token of its own.
OWT_ACRONYMS = words_of(
    """
    US UK EU UN NASA FBI CIA CEO TV AI NFL NBA NHL MLB GDP USA NATO FDA EPA CDC WHO IRS DNA PC PhD
    BBC CNN NBC CBS ABC NPR HBO ESPN iPhone iOS MP IT HR PR LA NYC DC GOP NSA DOJ SEC IMF ISIS UFC
    """
)

OWT_FOREIGN = words_of(
    """
    café naïve résumé fiancée déjà vu piñata jalapeño façade über doppelgänger crème brûlée coup
    señor señora mañana jamón hôtel élite rôle protégé attaché cliché soirée entrée
    東京 北京 中国 日本 上海 香港 台灣 大阪 한국 서울 日本語 中文 漢字 ありがとう こんにちは
    Путин Москва Россия Украина Киев спасибо привет да нет хорошо
    Ελλάδα Αθήνα שלום مرحبا القاهرة
    """
)

# Sentence openers (most sentences of real text start with one of a few dozen words).
OWT_STARTERS = words_of(
    """
    the it in this but he we they a i that there and as if she for you when on after one so what at
    while some many according however now these his our those both more at last even by
    """
)
OWT_ODD_PUNCTUATION = bars(
    "!!| --|...|?!| ***|:)| >>| &| +| =| /|.)|),|].| [|]|\u2026|\u2122|\u00ae| \u00b0|\u2019s|!!!| ~| "
)

EMOJI = words_of("😂 ❤️ 👍 🔥 😭 😍 🙏 😊 💯 🎉 👀 🤔 😎 🙌 ✨ 👏 💪 🚀 😢 🤣 🥺 😡 🇺🇸 ☀️ ⚽ 🎶")

TLDS = ("com", "com", "com", "org", "net", "co.uk", "io", "gov", "edu", "de", "ca", "com.au")

TS_NOUNS = words_of(
    """
    ball toy tree house box car flower cake book hat park garden sun sky water bird dog cat fish
    friend mom dad day home room bed door window table chair cup rock stick leaf grass sand boat kite
    balloon apple cookie candy bike truck train doll bear bunny duck frog bug bee butterfly shell star
    moon cloud rain snow hill river lake pond sea beach forest farm school shop store street bridge
    road fence gate wall floor bag basket bowl spoon plate jar bottle box blanket pillow picture
    paper pencil crayon paint drum song game puzzle block slide swing sandbox pool bath soap towel
    shoe sock coat dress shirt scarf glove ring necklace crown key lock map clock lamp light fire
    stone feather nest egg seed plant carrot banana orange grape pie bread milk juice soup sandwich
    pizza ice cream treat gift present party bell whistle rope wheel wagon tent flag button hole
    mud puddle wind storm rainbow castle tower cave tunnel sword shield wand magic spell dream story
    idea lesson secret surprise smile hug kiss tail ear nose eye hand foot head leg wing fur paw
    jacket helmet rocket robot dragon monster giant fairy princess prince king queen knight pirate
    ship treasure coin chest mirror brush comb vase jar sock mitten sled snowman pumpkin acorn nut
    berry mushroom pebble shell seashell crab worm snail ant spider owl fox wolf deer mouse rabbit
    squirrel horse cow pig sheep goat chicken hen lion tiger elephant monkey giraffe zebra bear
    turtle snake whale dolphin shark penguin puppy kitten pony lamb bunny otter
    """
)
TS_ANIMALS = words_of(
    """
    dog cat bird bunny duck frog bear fox owl mouse rabbit squirrel horse cow pig sheep lion tiger
    elephant monkey turtle puppy kitten dragon fish bee butterfly ladybug deer wolf penguin dolphin
    whale giraffe zebra pony lamb chick goat otter raccoon hedgehog beaver crab snail ant spider
    """
)
TS_ADJECTIVES = words_of(
    """
    big little small happy sad good nice kind red blue green yellow pink purple orange white black
    brown new old pretty beautiful funny silly shiny soft hard fast slow tall short long round warm
    cold hot wet dry dark bright loud quiet clean dirty brave scared tired hungry thirsty angry
    excited curious friendly gentle strong weak special favorite magic sparkly fluffy furry tiny
    huge giant sweet yummy smart careful careless busy lazy proud shy lonely bored sleepy sick
    healthy rich poor strange fancy plain colorful empty full heavy light sharp smooth rough sticky
    cozy grumpy jolly lucky messy neat noisy playful polite rude safe sour spicy tidy wild wise young
    amazing wonderful great perfect terrible horrible lovely gorgeous delicious creative helpful
    hopeful thankful cheerful careful graceful peaceful powerful precious
    """
)
TS_FEELINGS = words_of(
    "happy sad scared excited surprised proud angry sorry worried glad tired curious upset lonely "
    "brave calm grateful shy nervous thankful jealous confused"
)
TS_COLORS = words_of("red blue green yellow pink purple orange white black brown gold silver gray")
TS_FOODS = words_of(
    "cookies cake apples soup pizza sandwiches candy ice cream bananas carrots bread pie grapes "
    "muffins pancakes berries cheese popcorn"
)
TS_DRINKS = words_of("milk juice water lemonade tea cocoa")
TS_PLACES = words_of(
    """
    park garden forest yard house kitchen school beach farm zoo store shop jungle castle town
    village meadow field river pond lake hill playground street library bakery cave island ocean
    sky woods backyard barn attic room
    """
)
TS_TOYS = words_of("ball doll car truck kite teddy blocks train robot puzzle drum boat bike crayons")
TS_NAMES_GIRLS = words_of(
    """
    Lily Sue Mia Lucy Amy Anna Sara Emma Zoe Kitty Jane Molly Ellie Sophie Daisy Rose Lola Ruby
    Grace Chloe Ava Ella Mila Mandy Bella Polly Rosie Susie Jenny Jill Katie Lisa Nina Tina Maya
    Olivia Sally Annie Millie Hannah Abby Lila Luna Penny Mary Alice Sophia Emily Jasmine
    """
)
TS_NAMES_BOYS = words_of(
    """
    Tim Ben Tom Max Sam Jack Timmy Bob Leo Joe Mark Tommy Jake Billy Bobby Spot Buddy Toby Ollie
    Finn Alex Jim Johnny Danny Lucas Henry Charlie Oliver Peter Paul Mike Rex Teddy Benny Sammy
    Jimmy Roger Fred Ted Ned Dan Kevin Ryan Adam Eli Noah Jacob Owen Tony
    """
)
# base or base:past, so that irregular and consonant-doubling pasts are spelled right.
TS_VERBS = [
    tuple(item.split(":")) if ":" in item else (item, _past)
    for item, _past in (
        (item, item + ("d" if item.endswith("e") else "ed"))
        for item in words_of(
            """
            play jump run:ran eat:ate help look find:found share climb swim:swam dance sing:sang
            draw:drew paint read:read build:built fly:flew catch:caught throw:threw kick push pull
            open close fix clean cook bake:baked hide:hid seek:sought explore laugh smile hug:hugged
            hold:held carry:carried make:made give:gave take:took see:saw hear:heard feel:felt
            touch watch wait walk ride:rode roll pick plant grow:grew water feed:fed wash dig:dug
            chase hop:hopped skip:skipped clap:clapped nap:napped shout whisper listen learn try:tried
            cry:cried smell taste bring:brought keep:kept win:won lose:lost
            follow visit save fetch splash race wave write:wrote color count stack sort wrap bounce
            tickle rescue
            """
        )
    )
]
TS_SAY = words_of("said asked shouted replied whispered cried exclaimed yelled answered")
TS_INTERJECTIONS = ("Wow", "Oh no", "Look", "Yay", "Hi", "Hello", "Oh", "Hey", "Come on", "Please")
TS_NUMBERS = words_of("two three four five six seven eight nine ten")
