// The rule classifier's phrase lists, by language (en, de, fr, es, pt, nl). Each entry names
// its language so a decision can say which rule made it ("lexicon:unsubscribe:de").
// Patterns run on lower-cased text whose whitespace is collapsed; word boundaries are
// written as (?<![\p{L}\p{N}]) / (?![\p{L}\p{N}]) through the `w` helper because \b does not
// know accented letters.

export type Lang = 'en' | 'de' | 'fr' | 'es' | 'pt' | 'nl';

export interface Cue {
  lang: Lang;
  re: RegExp;
  weight: number;
}

/** A case-insensitive, Unicode-aware pattern whose ends must fall on word boundaries. */
export function w(source: string): RegExp {
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${source})(?![\\p{L}\\p{N}])`, 'iu');
}

function cues(lang: Lang, weight: number, sources: string[]): Cue[] {
  return sources.map((s) => ({ lang, weight, re: w(s) }));
}

// --- out of office -------------------------------------------------------------------------

/** Subjects auto-responders write ("Automatic reply: ...", "Abwesenheitsnotiz: ..."). */
export const OOO_SUBJECT: Cue[] = [
  ...cues('en', 1, ['^auto:', 'automatic reply', 'auto[- ]?reply', 'auto[- ]?response', 'out of (the )?office', 'ooo', 'away from (the |my )?office', 'on (annual |parental )?leave', 'vacation (reply|notice)', 'on vacation', 'on holiday', 'away until']),
  ...cues('de', 1, ['abwesenheitsnotiz', 'automatische antwort', 'abwesend', 'abwesenheit', 'außer haus', 'nicht im büro', 'im urlaub', 'urlaubsabwesenheit']),
  ...cues('fr', 1, ['réponse automatique', 'absence du bureau', 'absente? du bureau', "message d'absence", 'en congés?', 'absente?']),
  ...cues('es', 1, ['respuesta automática', 'fuera de (la )?oficina', 'ausente', 'de vacaciones', 'mensaje de ausencia']),
  ...cues('pt', 1, ['resposta automática', 'ausente do escritório', 'fora do escritório', 'ausência', 'de férias', 'mensagem de ausência']),
  ...cues('nl', 1, ['automatisch antwoord', 'afwezig', 'niet aanwezig', 'buiten kantoor', 'afwezigheidsmelding', 'met vakantie', 'niet op kantoor']),
];

/**
 * Body phrases. Weight 2: what only an auto-responder says ("I am out of the office", "limited
 * access to email", "for urgent matters contact"); weight 1: what a person also says in a real
 * reply ("on vacation", "back on Monday"). An out-of-office verdict needs 2 points, so "I'm on
 * holiday next week, but let's talk after" stays a human reply.
 */
export const OOO_BODY: Cue[] = [
  ...cues('en', 2, [
    "(i am|i'm|i will be|i'll be) (currently |now )?(out of (the )?office|ooo|away from (the |my )?(office|desk)|((out|away) )?on (annual |parental |maternity |paternity |sick |medical |study )?leave|out of the country|travell?ing with (limited|no) access)",
    'out of (the )?office (until|till|through|from|and will|with)',
    '(automatic|automated|auto)[- ]?(reply|response|message)',
    '(limited|no|restricted|intermittent|sporadic) access to (my )?(e-?mail|inbox)',
    'without access to (my )?(e-?mail|inbox)',
    "(i am|i'm) currently (out )?on (pto|vacation|holiday|holidays|leave)",
    "(i am|i'm|i will be|i'll be) (away|out|off) (until|till|through)",
    "(won't|will not) be (checking|reading|answering) (my )?(e-?mails?|messages|inbox)",
    'checking (my )?(e-?mails?|messages|inbox) (only )?(intermittently|periodically|sporadically|infrequently|occasionally|rarely)',
    '(up)?on my return',
    'when i (am back|return)',
    '(for|in case of|regarding) (anything (urgent|time[- ]sensitive|pressing)|(any )?(urgent|time[- ]sensitive|pressing) (matters?|requests?|issues?|inquiries|enquiries|questions))',
    'if (this|your (matter|message|request|e-?mail)) is urgent',
    'thank you for your (e-?mail|message|note)[.!,]? i am (currently )?(out|away)',
    'i will (respond|reply|get back to you) (to your (e-?mail|message) )?(as soon as possible|as soon as i can|when i)',
    'your (e-?mail|message) (will|has) not (be(en)? )?(forwarded|read)',
  ]),
  ...cues('en', 1, ['on (vacation|holiday|holidays|leave|pto)', 'travell?ing', 'on a (business )?trip', '(back|return(ing)?) (to the office |in the office )?on', "(i'?ll|i will) be back", 'returning on']),
  ...cues('de', 2, [
    '(ich bin|bin ich) ([^.!?]{0,60} )?(nicht im büro|abwesend|außer haus|nicht erreichbar|im urlaub|nicht im hause|in elternzeit|im mutterschutz)',
    'abwesenheitsnotiz',
    'automatische (antwort|nachricht|e-?mail)',
    '(keinen|eingeschränkten|nur eingeschränkt(en)?|begrenzten) zugriff auf (meine |mein )?(e-?mails?|postfach)',
    'in dringenden (fällen|angelegenheiten)',
    'ohne (zugriff auf|zugang zu) (meine |mein )?(e-?mails?|postfach)',
    'bei dringenden (anliegen|fragen|angelegenheiten)',
    '(ihre|deine) (e-?mail|nachricht) wird (nicht|weder) ([^.!?]{0,30} )?(weitergeleitet|gelesen)',
    'nach meiner rückkehr',
  ]),
  ...cues('de', 1, ['im urlaub', 'auf (dienst)?reise', 'unterwegs', 'wieder (im büro|erreichbar|da|zurück|im hause)', 'zurück am', 'ab dem [^.!?]{1,25} wieder']),
  ...cues('fr', 2, [
    'je suis (actuellement |présentement )?(absente?|en congés?|en vacances|hors du bureau|en déplacement)',
    'en congé (maternité|paternité|parental|maladie)',
    'absente? du bureau',
    '(réponse|message) automatique',
    'accès (limité|restreint) à (mes |ma )?(e-?mails?|courriels?|messagerie|boîte)',
    "en cas d'urgence",
    'sans accès à (mes |ma )?(e-?mails?|courriels?|messagerie)',
    'pour toute (demande |question )?urgente',
    'dès mon retour',
    'à mon retour',
  ]),
  ...cues('fr', 1, ['en congés?', 'en vacances', 'de retour (le|au bureau)']),
  ...cues('es', 2, [
    '(estoy|me encuentro|estaré) (actualmente )?(fuera de (la )?oficina|ausente|de vacaciones|de baja)',
    'baja (por )?(maternidad|paternidad|maternal)',
    'respuesta automática',
    'mensaje automático',
    'acceso (limitado|restringido) (a mi|al) correo',
    'para (asuntos|temas|cuestiones) urgentes',
    'en caso de urgencia',
    'sin acceso (al|a mi|a) correo',
    'a mi regreso',
    'cuando regrese',
  ]),
  ...cues('es', 1, ['(estoy|estaré) fuera hasta', 'de vacaciones', 'de viaje', 'regresaré el', 'estaré de vuelta', 'de regreso el']),
  ...cues('pt', 2, [
    '(estou|estarei|encontro-me|me encontro) (atualmente )?(ausente|fora do escritório|de férias|de licença)',
    'licença(-| )(maternidade|paternidade)',
    'resposta automática',
    'mensagem automática',
    'acesso (limitado|restrito) (ao|a meu|ao meu|a) e-?mails?',
    'para (assuntos|questões) urgentes',
    'em caso de urgência',
    'sem acesso (ao|a meu|ao meu) e-?mail',
    '(no|após o|após|depois do) (meu )?retorno',
    'quando (eu )?retornar',
  ]),
  ...cues('pt', 1, ['de férias', 'em viagem', 'viajando', 'retorno (em|no dia|dia)', 'estarei de volta', 'retornarei']),
  ...cues('nl', 2, [
    '(ik ben|ben ik) ([^.!?]{0,60} )?(afwezig|niet op kantoor|niet aanwezig|buiten kantoor|met vakantie|op vakantie|niet bereikbaar|(met|op) \\p{L}*verlof)',
    'lees (mijn )?(e-?)?mail niet',
    'automatisch (antwoord|bericht)',
    'beperkt(e)? toegang tot (mijn )?e-?mail',
    'voor dringende (zaken|vragen)',
    'in dringende gevallen',
    'zonder toegang tot (mijn )?e-?mail',
    'na mijn terugkomst',
    'bij (mijn )?terugkomst',
    'uw (e-?mail|bericht) wordt niet doorgestuurd',
  ]),
  ...cues('nl', 1, ['met vakantie', 'op reis', 'op vakantie', 'weer (aanwezig|op kantoor|bereikbaar)', 'terug op']),
];

// --- automatic acknowledgements (ticket systems) ---------------------------------------------

/**
 * What a ticket system (Zendesk, Freshdesk, ServiceNow, Jira Service Management, ...) answers
 * without a person and often without an auto-reply header: "Your request (#12345) has been
 * received", "A ticket has been created", "reply to this email to add comments". Weight 2: what
 * only such a system writes; weight 1: what a person may also write ("we have received your
 * email", "thank you for contacting support", "one of our agents will get back to you", a
 * ticket number). Two points make an automatic answer; a subject tag ("[Ticket #123]",
 * AUTO_ACK_SUBJECT) is one of them at most, so a person answering from a helpdesk, or
 * mentioning a ticket, stays a human reply.
 */
export const AUTO_ACK: Cue[] = [
  ...cues('en', 2, [
    '(your|this|the) (support |service |help ?desk )?(request|ticket|case|inquiry|enquiry|query|incident)( [^.!?]{0,30})? (has been|was|is now|have been) (received|created|logged|opened|registered|submitted|raised)',
    '(a|your|the) (new )?(support |service )?(ticket|case|incident)( [^.!?]{0,30})? (has been|was) (created|opened|logged|raised|generated)',
    '(to add (additional |more |further )?(comments|information|details|notes),? (simply |just )?reply to this (e-?mail|message)|reply to this (e-?mail|message) to add (additional |more |further )?(comments|information|details|notes))',
    'please (type|write|enter) your reply above this line',
    '(this is an?|this) (automatic|automated|auto-generated|system-generated|computer-generated) (acknowledge?ment|confirmation|notification|receipt|e-?mail|message|response|reply)',
    'this (e-?mail|message|notification) (was|is|has been) (sent |generated )?automatically',
  ]),
  ...cues('en', 1, [
    "we(?: have|'ve)? received your (request|e-?mail|message|inquiry|enquiry|ticket|query)",
    'your (e-?mail|message) (has been|was) (received|logged|registered)',
    // "Thank you for contacting Initech Support": up to two words of a name before the desk's.
    'thanks? (you )?for (contacting|reaching out to|writing to) (our |the )?([^ .!?]+ ){0,2}(customer |technical |tech |it )?(support|service|help ?desk|service ?desk|customer care|customer service|success team)',
    '(one of our|a member of our|an?) ([a-z]+ )?(agents?|representatives?|team members?|specialists?|advisors?|engineers?|analysts?) will (get back to you|respond|reply|be in touch|contact you|review)',
  ]),
  // A ticket number, written alike in every language (one cue for all: a cue per language counted
  // "ticket #4432" six times). "case 2027", "request 500 seats", "demande 2027" are words a person
  // writes: those need a number sign or a word for "number".
  ...cues('en', 1, [
    '(ticket|incident|vorgang|chamado|protocolo|melding)(nummer| ?(number|no\\.?|nr\\.?|id|n°|n\\.?º|número))?:? ?#? ?[a-z]{0,6}-?\\d{3,}',
    '(case|request|reference|ref\\.?|anfrage|demande|dossier|référence|caso|solicitud|incidencia|aanvraag)(( number| no\\.?| id| nr\\.?| n°| numéro| n\\.?º| número|nummer):? ?#? ?|:? ?#|: )[a-z]{0,6}-?\\d{3,}',
    '(inc|req|ritm|cs)\\d{6,}',
  ]),
  ...cues('de', 2, [
    'ihre (anfrage|supportanfrage|serviceanfrage|ticketanfrage|meldung)( [^.!?]{0,30})? (ist|wurde) ([^.!?]{0,20} )?(eingegangen|erhalten|angelegt|erstellt|registriert|aufgenommen)',
    '(ein )?(ticket|supportticket|vorgang)( [^.!?]{0,30})? wurde ([^.!?]{0,20} )?(erstellt|angelegt|eröffnet)',
    'eingangsbestätigung',
    'automatisch (erstellte|generierte|versandte) (e-?mail|nachricht|bestätigung)',
  ]),
  ...cues('de', 1, [
    '(wir haben|haben wir) ihre (anfrage|nachricht|e-?mail) erhalten',
    'vielen dank für ihre (anfrage|nachricht) an (unseren |den |unser )?([^ .!?]+ ){0,2}(support|kundenservice|kundendienst|service|helpdesk)',
    '(einer? unserer|unsere) (mitarbeiter(in|innen)?|kollegen|kolleginnen)( [^.!?]{0,40})? (wird|werden) sich ([^.!?]{0,30} )?melden',
  ]),
  ...cues('fr', 2, [
    'votre (demande|requête|ticket|dossier)( [^.!?]{0,30})? (a bien été|a été) (reçue?|enregistrée?|créée?|prise en compte|ouverte?)',
    '(un )?(ticket|dossier)( [^.!?]{0,30})? a été (créé|ouvert)',
    'accusé de réception',
    'généré automatiquement',
  ]),
  ...cues('fr', 1, [
    'nous avons (bien )?reçu votre (demande|message|e-?mail|courriel)',
    "merci d'avoir contacté (notre |le |l')?(support|service|assistance|service client|équipe)",
    '(un membre de notre équipe|un de nos (conseillers|agents|techniciens)|notre équipe)( [^.!?]{0,30})? (vous répondra|reviendra vers vous|vous recontactera|vous contactera)',
  ]),
  ...cues('es', 2, [
    'su (solicitud|petición|consulta|ticket|caso|incidencia)( [^.!?]{0,30})? (ha sido|fue) (recibid[oa]|registrad[oa]|cread[oa])',
    '(se ha creado|hemos creado|se creó) (un|el) (ticket|caso)',
    'acuse de recibo',
    'generado automáticamente',
  ]),
  ...cues('es', 1, [
    'hemos recibido su (solicitud|mensaje|consulta|correo|petición)',
    'gracias por (contactar con|contactar a|ponerse en contacto con) (nuestro |el |nuestra |la )?(soporte|servicio|equipo de soporte|atención al cliente|servicio de atención)',
    '(uno de nuestros|un) (agentes?|representantes?|técnicos?|asesores?)( [^.!?]{0,30})? (le responderá|se pondrá en contacto)',
  ]),
  ...cues('pt', 2, [
    '(sua|a sua|seu|o seu) (solicitação|requisição|chamado|pedido|ticket)( [^.!?]{0,30})? (foi|já foi) (recebid[oa]|registrad[oa]|criad[oa]|abert[oa])',
    '(um )?(chamado|ticket|protocolo)( [^.!?]{0,30})? foi (aberto|criado|registrado|gerado)',
    'gerad[oa] automaticamente',
  ]),
  ...cues('pt', 1, [
    'recebemos (a )?sua (solicitação|mensagem|consulta|requisição|pedido)',
    'obrigad[oa] por (entrar em contato com|contatar) (o |nosso |a nossa |nossa )?(suporte|atendimento|central de atendimento|equipe de suporte)',
    '(um de nossos|um|uma) (agentes?|atendentes?|analistas?|especialistas?)( [^.!?]{0,30})? (entrará em contato|responderá|retornará)',
  ]),
  ...cues('nl', 2, [
    'uw (verzoek|aanvraag|vraag|ticket|melding)( [^.!?]{0,30})? is (in goede orde )?(ontvangen|aangemaakt|geregistreerd)',
    '(er is )?een ticket( [^.!?]{0,30})? (aangemaakt|geopend)',
    'ontvangstbevestiging',
    'automatisch gegenereerd',
  ]),
  ...cues('nl', 1, [
    'we hebben uw (verzoek|aanvraag|vraag|bericht|e-?mail) ontvangen',
    'bedankt voor (uw bericht aan|het contact met|het contacteren van) (onze |de )?(support|klantenservice|helpdesk|servicedesk)',
    '(een van onze|een) (medewerkers?|collega\'s)( [^.!?]{0,30})? (neemt|zal|nemen) ([^.!?]{0,30} )?contact',
  ]),
];

/**
 * A ticket system's subject ("[Ticket #123] Re: ...", "[#ABC-123] ...", "Request received: ...",
 * "Eingangsbestätigung: ..."), read in the part of the subject that is not our own wording.
 * One point at most, whatever matches: a person answering from a helpdesk keeps its tag.
 */
export const AUTO_ACK_SUBJECT: Cue[] = [
  ...cues('en', 1, ['(ticket|request|case|inquiry|enquiry) (has been )?(received|created|opened|logged|confirmation|acknowledge?ment)', '#[a-z]{0,6}-?\\d+', '(ticket|case|request|incident)( number| no\\.?| id)?:? ?#? ?[a-z]{0,6}-?\\d{2,}', '(inc|req|ritm|cs)\\d{6,}']),
  ...cues('de', 1, ['eingangsbestätigung', '(anfrage|ticket) (erhalten|eingegangen|erstellt|eröffnet)']),
  ...cues('fr', 1, ['accusé de réception', '(demande|ticket) (reçue?|créée?|ouverte?)']),
  ...cues('es', 1, ['acuse de recibo', '(solicitud|ticket|caso) (recibid[oa]|cread[oa])']),
  ...cues('pt', 1, ['(solicitação|chamado|ticket) (recebid[oa]|criad[oa]|abert[oa])']),
  ...cues('nl', 1, ['ontvangstbevestiging', '(aanvraag|ticket|verzoek) (ontvangen|aangemaakt)']),
];

// --- unsubscribe ---------------------------------------------------------------------------

/** Asks to be removed or to stop: any one is enough. */
export const UNSUBSCRIBE: Cue[] = [
  ...cues('en', 1, [
    'unsubscribe',
    'opt(-| )?(me )?out',
    'remove (me|us|my (e-?mail|address|name|contact|details|data))',
    'take (me|us|my (e-?mail|address|name)) off',
    'remove (this|my|our) (e-?mail )?(address|contact|email)',
    '(from|off|to) (all )?(future|further) (mailings|e-?mails|emails|messages|communications?)',
    // "Stop." as a sentence of its own ("I've asked twice now. Stop.")
    '(?<=^|[.!?] )(please )?stop([.!]+(?= |$)|$)',
    '(off|from) (your|the|this|all (of )?your) (e-?mail(ing)? |mailing |distribution |contact |marketing |sales )?(lists?|database)',
    "(stop|quit|cease) (e-?mailing|emailing|mailing|contacting|messaging|sending|writing|spamming|following up|reaching out)",
    "(do not|don't|dont|never) (ever )?(e-?mail|contact|write to|message|mail) (me|us)",
    'no (more|further) (e-?mails?|emails|messages|contact)',
    "(don't|do not) want (any )?(more |further )?(e-?mails?|emails|messages)",
    'delete (my|our) (data|e-?mail|address|contact|information)',
    'harass(ment|ing)?',
    '(this is|that is|this is just) spam',
    'remove my (e-?mail )?address',
  ]),
  ...cues('de', 1, [
    'abmelden',
    'abbestellen',
    'austragen',
    '(entfernen|löschen|streichen|nehmen) sie mich',
    'mich (bitte )?(aus|von) ([^.!?]{0,40} )?(verteiler|liste|mailingliste|datenbank|newsletter)',
    '(aus|von) (ihrem|ihrer|dem|der|eurem|eurer) (e-?mail-?)?(verteiler|liste|mailingliste|datenbank)',
    'keine (weiteren |e-?mails |nachrichten )?(e-?mails|mails|nachrichten|zusendungen) mehr',
    'keine weiteren (e-?mails|mails|nachrichten|zusendungen)',
    'nicht (mehr|weiter) (kontaktieren|anschreiben|schreiben|anmailen)',
    '(kontaktieren|schreiben) sie mich nicht (mehr)?',
    'hören sie auf',
    'meine daten löschen',
    'belästigung',
    '(das ist|ist das) spam',
    'sofort löschen',
    'schreiben sie mir nicht (mehr)?',
    'aus (dem|ihrem) verteiler',
    '(meine|meinen) (e-?mail-?adresse|adresse|daten|kontakt) ([^.!?]{0,30} )?(löschen|entfernen|streichen)',
  ]),
  ...cues('fr', 1, [
    'désabonner',
    'désinscrire',
    'désinscription',
    'désabonnement',
    '(retirez|supprimez|enlevez|rayez)(-| )moi',
    'me (retirer|supprimer|désinscrire|désabonner|rayer)',
    '(de|à) (votre|vos|la) (listes?|fichiers?|bases?)',
    '(supprimer|retirer|effacer|enlever) (mon|mes) (adresse|e-?mail|coordonnées|données|contact)',
    'ne (plus )?me (contactez|écrivez|sollicitez|relancez) plus',
    'ne plus (me )?(contacter|écrire|recevoir|solliciter|relancer)',
    "(arrêtez|cessez) de (m'|me )?(envoyer|écrire|contacter|solliciter|relancer)",
    'ne (souhaite|veux|désire) plus (rien )?(recevoir|être contactée?|être sollicitée?)',
    'désabonnez(-| )moi',
    'désinscrivez(-| )moi',
    'harcèlement',
    "c'est du spam",
    '(supprimez|effacez|retirez) (mon|mes) (adresse|e-?mail|coordonnées|données)',
  ]),
  ...cues('es', 1, [
    '(darme|dame|denme|deme|darnos) de baja',
    'dar(me)? de baja',
    '(elimín|elimin|quít|quit|sáqu|saqu|bórr|borr)(en|e|a|ar)(me|nos)',
    '(de|desde) (su|tu|la|sus) (lista|base de datos)',
    '(eliminar|borrar|quitar|retirar) (mi|mis) (correo|dirección|datos|contacto)',
    'no (me|nos) (contacten|escriban|envíen|manden|vuelvan a (contactar|escribir))',
    '(dejen|deje|deja) de (enviarme|escribirme|contactarme|mandarme)',
    'no (quiero|deseo) recibir (más|mas)',
    'cancelar (la )?suscripción',
    'acoso',
    '(esto|eso) es spam',
    '(dejad|dejen|deje|deja) de (escribirme|mandarme|enviarme|contactarme|escribir)',
    '(borrad|eliminad|quitad|borren|eliminen) (mi|mis) (dirección|datos|correo|contacto)',
    'no quiero recibir nada',
  ]),
  ...cues('pt', 1, [
    'descadastr(ar|e|em|o)',
    'cancelar (a )?(minha )?inscrição',
    '(remova|removam|retire|retirem|tire|tirem|exclua|excluam)(-me| me| meu| o meu)',
    'me (remova|removam|retire|retirem|tire|tirem|exclua|excluam|descadastre)',
    '(da|de) (sua|vossa|tua) (lista|base)',
    '(retirar|remover|excluir|tirar|apagar) (o |a )?(meu|minha|meus) (e-?mail|contato|endereço|nome|dados|cadastro)',
    'não (me )?(enviem|envie|contatem|contate|contactem|escrevam|mandem) mais',
    '(parem|pare) de (me )?(enviar|mandar|contatar|escrever)',
    'não (quero|desejo) (mais )?receber',
    'assédio',
    'isso é spam',
    '(apaguem|apague|excluam|exclua) (o )?(meu|meus|minha) (endereço|dados|e-?mail|contato)',
    'parem de me',
  ]),
  ...cues('nl', 1, [
    'afmelden',
    'uitschrijven',
    'verwijder (mij|me|ons|mijn (e-?mail|adres|gegevens))',
    'haal (mij|me|ons) (van|uit)',
    '(van|uit) (de|uw|jullie|je) (mailinglijst|lijst|verzendlijst|database|bestand)',
    'geen (e-?mails|mails|berichten) meer',
    'stop (met|maar met) (mailen|e-?mailen|sturen|benaderen)',
    'niet meer (mailen|e-?mailen|benaderen|contacteren|sturen)',
    'stalken',
    'dit is spam',
    'wis mijn (gegevens|adres)',
    'stop met mailen',
    'ik wil niets meer (ontvangen)?',
  ]),
];

/** A reply that is only one of these words is a stop request. */
export const STOP_WORDS = /^(stop|stopp|unsubscribe|remove|remove me|arrêt|arrêter|stoppen|alto|parar|pare|baja|afmelden|abmelden)[.!]*$/iu;

// --- not interested / interested -----------------------------------------------------------

export const NOT_INTERESTED: Cue[] = [
  ...cues('en', 3, [
    'not (really |at all |very )?interested',
    'no interest',
    'not of interest',
    'no,? thanks?( you)?',
    'not for (us|me)',
    'not a (good |great )?fit',
    "(we're|we are|i'm|i am) (all )?set",
    "(we|i)( will|'ll) pass",
    'pass on this',
    'not (looking|in the market)',
    'no need',
    'not (at this time|right now|now|for now|a priority|relevant)',
    'no budget',
    '(already|currently) (have|use|using|work with|working with|signed with|contracted)',
    '(happy|satisfied) with (our|my|the) current',
    '(politely |respectfully )?declin(e|ing)',
    'please (do not|don\'t) follow up',
    'who gave you my',
    "(isn't|is not|not) (really )?(a|our) (priority|focus)",
    "(doesn't|does not|won't|will not|wouldn't|would not) (really )?(apply|make sense|work for us|be a fit)",
    "(we're|we are|i'm|i am) (good|fine|covered|all good)(?! to)",
    'no longer (need|needed|relevant|hiring|looking)',
    'not hiring',
    "(don't|do not|doesn't|does not) (really )?need",
    '(went|gone|going|decided to go) with (a competitor|another (vendor|provider|solution|tool|option|company)|someone else)',
    '(way |much |far )?too (small|early|big|large) for',
    "not (something|anything) (we're|we are|i'm|i am|we|i)",
    '(built|build|building|developed|have) (something |it |this |our own( tool| solution)? )?in-house',
    'no (budget|money|funds)',
    'how did you get my',
  ]),
  ...cues('en', 1, ['not sure']),
  ...cues('en', 2, ['good luck']),
  ...cues('de', 3, [
    'kein(e|en)? interesse',
    'nicht interessiert',
    'kein(en)? bedarf',
    'nein,? danke',
    'danke,? nein',
    '(derzeit|aktuell|momentan|im moment|zurzeit|zur zeit) (leider )?(nicht|kein)',
    '(haben|nutzen|verwenden) ([^.!?]{0,25} )?(bereits|schon) (eine|einen|ein)',
    'passt ([^.!?]{0,20} )?nicht',
    'kein budget',
    '(sehr )?(zufrieden|glücklich) mit (unserer|unserem|unseren|der|dem|den)',
    // verb-final word order: "mit unserer aktuellen Lösung sehr zufrieden"
    'mit (unserer|unserem|unseren|der|dem|den) [^.!?]{0,40}zufrieden',
    'keine priorität',
    'nicht (relevant|notwendig|nötig|das richtige)',
    '(arbeiten|sind) (bereits|schon) mit',
    'brauchen (wir|ich) (derzeit |aktuell |momentan )?nicht',
    'wir verzichten',
  ]),
  ...cues('fr', 3, [
    'pas (vraiment |du tout )?intéressée?s?',
    'aucun intérêt',
    'non,? merci',
    'pas (de )?besoin',
    "pas pour (le moment|l'instant|nous|moi)",
    '(nous avons|on a|nous utilisons) déjà',
    'ne (nous|m) ?intéresse pas',
    'pas le bon moment',
    'pas de budget',
    'pas preneurs?',
    'pas une priorité',
    '(satisfaite?s?|contente?s?) (de|avec) (notre|nos|la|le|l\'|notre)',
    "pas (pertinent|nécessaire|d'actualité)",
    '(nous )?travaillons déjà avec',
    "n'avons pas besoin",
    '(ne )?correspond pas',
    'pas (à|a) nos besoins',
  ]),
  ...cues('es', 3, [
    'no (me|nos) interesa',
    'no (estoy|estamos) interesad[oa]s?',
    'no,? gracias',
    'no es (el |buen )?momento',
    'ya (tenemos|contamos con|usamos|utilizamos|trabajamos con)',
    'no (lo )?necesitamos',
    'sin interés',
    '(no es|no son) (una )?prioridad',
    'no (es algo que )?necesit(amos|emos|o)',
    'no (tenemos|hay) presupuesto',
    '(satisfechos|contentos) con (nuestra|nuestro|la|el)',
    'ya trabajamos con',
    'no tiene sentido',
    '(por ahora|de momento|esta vez|por esta vez) paso',
  ]),
  ...cues('pt', 3, [
    'não (tenho|temos) interesse',
    'não (estou|estamos) interessad[oa]s?',
    'não,? obrigad[oa]',
    'não é o momento',
    'já (temos|utilizamos|usamos|trabalhamos com)',
    'não precisamos',
    'sem interesse',
    'agora não',
    'não (temos|há|tenho) orçamento',
    'não é (uma )?prioridade',
    '(satisfeitos|contentes) com',
    'não (precisamos|necessitamos)',
    'não faz sentido',
  ]),
  ...cues('nl', 3, [
    'geen interesse',
    'niet geïnteresseerd',
    'nee,? (dank je|dank u|bedankt)',
    'geen behoefte',
    '(op dit moment|momenteel|nu) (even )?(niet|geen)',
    '(hebben|gebruiken) (al|reeds) (een)?',
    'niet relevant',
    'geen budget',
    '(werken|zitten) (al|reeds) (met|bij)',
    'geen prioriteit',
    '(tevreden|blij) met (onze|ons|de|het)',
    'niet (nodig|relevant)',
    'dus nee',
    'niet aan de orde',
    'niet van toepassing',
  ]),
];

/**
 * The polite decline: thanks, then "but" ("Thanks Alice, but we're too small", "Vielen Dank,
 * aber ...", "Obrigada, mas ..."). Weight 2, so a real request after the "but" ("Thanks, but
 * can you send the pricing first?") still wins.
 */
export const POLITE_DECLINE: Cue[] = [
  ...cues('en', 2, ["(thanks|thank you|appreciate (it|the (note|email|offer|outreach)))[^.!?]{0,40}?,? but"]),
  ...cues('de', 2, ['(danke|vielen dank|besten dank)[^.!?]{0,40}?,? aber']),
  ...cues('fr', 2, ['merci[^.!?]{0,40}?,? mais']),
  ...cues('es', 2, ['(gracias|te agradezco|le agradezco|agradezco)[^.!?]{0,40}?,? pero']),
  ...cues('pt', 2, ['(obrigad[oa]|agradeço)[^.!?]{0,40}?,? mas']),
  ...cues('nl', 2, ['(bedankt|dank je|dank u|dank voor)[^.!?]{0,40}?,? maar']),
];

/** A reply that is only "no" in one of the languages. */
export const BARE_NO = /^(no|nope|nah|nein|non|não|nao|nee)[.!]*$/iu;

/**
 * A later time to talk ("try me next quarter", "melden Sie sich im Januar"). Weight 1 on the
 * interested side: with a refusal ("not interested right now, but try again next quarter") the
 * refusal's weight 3 wins; with a "gladly" or nothing else, it is a warm lead for later.
 */
const DEFERRAL: Cue[] = [
  ...cues('en', 1, [
    '(try|reach out|reach back out|ping|contact|check (back )?in|circle back|reconnect|follow up)( with)?( me| us)?( again)? (in|next|after|later)',
    'maybe (later|next year|next quarter|in the future)',
    '(next|in the next|in a few|in a|in \\d+) (quarter|year|months?)',
    'on our (list|radar|roadmap)',
  ]),
  ...cues('de', 1, ['in \\d+ monaten', '(im )?nächste(n|s)? (jahr|quartal)', 'vielleicht später', 'im (januar|februar|märz|april|mai|juni|juli|august|september|oktober|november|dezember)', 'anfang (des|nächsten) (jahres|monats)']),
  ...cues('fr', 1, ["l'année prochaine", 'le (trimestre|semestre) prochain', 'au prochain (trimestre|semestre)', 'dans (quelques|\\d+) mois', 'plus tard', 'en (janvier|février|mars|avril|mai|juin|juillet|septembre|octobre|novembre|décembre)', 'relancez(-| )moi', 'recontactez(-| )moi']),
  ...cues('es', 1, ['el (próximo|proximo) (año|trimestre)', 'más adelante', 'dentro de \\d+ meses', 'en (enero|febrero|marzo|abril|mayo|junio|julio|septiembre|octubre|noviembre|diciembre)', 'vuelve a escribirme', 'escríbeme']),
  ...cues('pt', 1, ['(no )?próximo (ano|trimestre)', 'mais para frente', 'daqui a \\d+ meses', 'em (janeiro|fevereiro|março|abril|maio|junho|julho|setembro|outubro|novembro|dezembro)', 'me (procure|escreve|escreva) (de novo|novamente|em)']),
  ...cues('nl', 1, ['volgend (jaar|kwartaal)', 'over \\d+ maanden', 'later dit jaar', 'in (januari|februari|maart|april|mei|juni|juli|september|oktober|november|december)', 'mail me (dan )?(in|later|nog eens)']),
];

/** Passing the message on to the person who decides, or naming them: a lead to follow. */
const REFERRAL: Cue[] = [
  ...cues('en', 3, ["(i'?ve|i have|i) (forwarded|passed|sent) (this|your (note|email|message)|it) (on )?(to|along)", 'looping in', "(talk|speak|reach out) to (our|my) ", '(she|he) handles (this|that)', 'the right person (is|to (talk|speak))', '(is|would be) the (right|best) person']),
  ...cues('de', 3, ['weitergeleitet', '(dafür|hierfür) ist [^.!?]{0,60}zuständig', '(sprechen|wenden) sie sich (besser |bitte )?(an|mit)', 'sprechen sie (besser |bitte )?mit', 'in kopie gesetzt', 'der richtige ansprechpartner', 'die richtige ansprechpartnerin', 'kümmert sich um']),
  ...cues('fr', 3, ['transféré', 'le bon interlocuteur', 'la bonne interlocutrice', '(voyez|voir) (plutôt )?avec', "c'est (lui|elle) qui (gère|s'occupe)", '(je la|je le|les) mets? en copie', 'de ma part']),
  ...cues('es', 3, ['(he )?reenviado', 'la persona (adecuada|indicada)', 'habla con (él|ella|nuestr[oa])', '(eso|esto) lo lleva', '(la|lo) pongo en copia', 'de mi parte']),
  ...cues('pt', 3, ['encaminhei', 'a pessoa certa', 'fale com (ele|ela|o|a|nosso|nossa)', 'quem cuida disso', 'coloquei em cópia']),
  ...cues('nl', 3, ['doorgestuurd', 'de juiste persoon', 'neem (contact )?op met', 'ligt bij', 'in de cc', 'mail (hem|haar) maar']),
];

/** Asking what it costs, how it works, whether it fits: interest, phrased as a question. */
const QUESTION: Cue[] = [
  ...cues('en', 3, ['what (are we talking|would it be) price', '(ballpark|price-?wise)', 'does (it|this) integrate', 'case stud(y|ies)', 'is there a (pilot|trial)']),
  ...cues('de', 3, ['was kostet', 'welchen kosten', 'gibt es eine schnittstelle', 'referenz(kunden|en)']),
  ...cues('fr', 3, ['combien', 'quel est le (tarif|prix|coût)', "(s'intègre|intégration) avec", 'des références']),
  ...cues('es', 3, ['cuánto (cuesta|cuestan|vale|sale)', 'se integra con', '(tenéis|tienen|tienes) clientes']),
  ...cues('pt', 3, ['quanto (custa|sai|fica)', 'integram com', '(vocês )?têm cases']),
  ...cues('nl', 3, ['wat kost', 'wat zijn (ongeveer )?de kosten', 'koppeling met', 'hebben jullie klanten']),
];

export const INTERESTED: Cue[] = [
  ...DEFERRAL,
  ...REFERRAL,
  ...QUESTION,
  ...cues('en', 3, [
    'interested',
    "let'?s (talk|chat|connect|meet|set (something|a time|it) up|schedule|do it|book|find a time|hop on)",
    'sounds (good|great|interesting|promising)',
    "(i'?d|i would|we'?d|we would) (love|like|be happy|be glad) to (chat|talk|learn|hear|see|discuss|connect|meet|know)",
    'happy to (chat|talk|connect|meet|learn|hop on)',
    '(book|schedule|set up|arrange) (a|an|some) (call|meeting|demo|time|chat)',
    'send (me |us |over )?(some |more )?(info|information|details|a deck|the deck|pricing|a proposal|a quote)',
    'tell me more',
    'how much',
    'what (does it|do you|would it) (cost|charge)',
    '(pricing|demo|calendly)',
    '(are you|i am|i\'m|we are|we\'re) (free|available)',
    'what times?',
    '(call|ring) me',
    'count (me|us) in',
    'worth a (chat|call|conversation|look)',
    'could work',
  ]),
  ...cues('en', 2, ['yes', 'sure', 'of course', 'absolutely', 'definitely', 'keen', 'curious']),
  ...cues('de', 3, [
    'interess(iert|ant|e)',
    'klingt (gut|spannend|interessant)',
    'lassen sie uns',
    'lass uns',
    'termin[a-zäöüß]*',
    '(rufen sie|ruf) mich',
    '(schicken|senden) sie (mir|uns)',
    'mehr (infos|informationen|details)',
    'demo',
    'wann (haben|hätten) sie zeit',
    '(preis|preise|kosten|angebot)',
  ]),
  ...cues('de', 2, ['gerne?', 'ja', 'sehr gut']),
  ...cues('fr', 3, [
    'intéress(é|ée|és|ées|ant|e)',
    'volontiers',
    'avec plaisir',
    '(un )?appel',
    'rendez-vous',
    'démo',
    "plus d'(informations|infos|détails)",
    '(envoyez|envoyer)(-| )moi',
    'disponibles?',
    'ça me (va|convient)',
    '(tarifs?|prix)',
    'échanger',
  ]),
  ...cues('fr', 2, ['oui', 'pourquoi pas', 'bien sûr']),
  ...cues('es', 3, [
    'me interesa',
    '(estoy|estamos) interesad[oa]s?',
    'con gusto',
    'encantad[oa]',
    'llamada',
    'reunión',
    'agend(ar|emos)',
    'más información',
    '(envíe|envíeme|envíame|mándame|mande)',
    'disponible',
    '(precio|costo)s?',
    '(hablemos|podemos hablar)',
  ]),
  ...cues('es', 2, ['sí', 'claro', 'perfecto']),
  ...cues('pt', 3, [
    '(tenho|temos) interesse',
    '(estou|estamos) interessad[oa]s?',
    'com prazer',
    'reunião',
    '(ligação|ligar)',
    '(agendar|marcar)',
    'mais informações',
    '(envie|me envie|mande)',
    'disponível',
    '(preço|custo)s?',
    '(vamos|podemos) conversar',
  ]),
  ...cues('pt', 2, ['sim', 'claro', 'perfeito']),
  ...cues('nl', 3, [
    'interess(e|ant)',
    'geïnteresseerd',
    '(laten we|kunnen we) (bellen|afspreken|praten|een afspraak|een call|even)',
    'afspraak',
    '(bellen|belafspraak)',
    'demo',
    'meer (informatie|info)',
    'stuur (me|mij|ons)',
    'beschikbaar',
    '(prijs|prijzen|kosten)',
    'klinkt (goed|interessant)',
  ]),
  ...cues('nl', 2, ['graag', 'ja', 'prima']),
];

// --- month names for return dates ----------------------------------------------------------

/** Month name (or abbreviation, lower-cased, without a dot) to 1..12, across the six languages. */
export const MONTHS: Record<string, number> = (() => {
  const table: Array<[number, string[]]> = [
    [1, ['january', 'jan', 'januar', 'jänner', 'janvier', 'janv', 'enero', 'ene', 'janeiro', 'januari']],
    [2, ['february', 'feb', 'februar', 'février', 'févr', 'fevrier', 'febrero', 'fevereiro', 'fev', 'februari']],
    [3, ['march', 'mar', 'märz', 'maerz', 'mars', 'marzo', 'março', 'marco', 'maart', 'mrt']],
    [4, ['april', 'apr', 'avril', 'avr', 'abril', 'abr']],
    [5, ['may', 'mai', 'mayo', 'maio', 'mei']],
    [6, ['june', 'jun', 'juni', 'juin', 'junio', 'junho']],
    [7, ['july', 'jul', 'juli', 'juillet', 'juil', 'julio', 'julho']],
    [8, ['august', 'aug', 'août', 'aout', 'agosto', 'ago', 'augustus']],
    [9, ['september', 'sep', 'sept', 'septembre', 'septiembre', 'setembro', 'set']],
    [10, ['october', 'oct', 'oktober', 'okt', 'octobre', 'octubre', 'outubro', 'out']],
    [11, ['november', 'nov', 'novembre', 'noviembre', 'novembro']],
    [12, ['december', 'dec', 'dezember', 'dez', 'décembre', 'déc', 'diciembre', 'dic', 'dezembro']],
  ];
  const out: Record<string, number> = {};
  for (const [n, names] of table) for (const name of names) out[name] = n;
  return out;
})();
