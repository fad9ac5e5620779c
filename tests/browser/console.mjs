// The operator console in headless Chromium against a real `twopc serve`: a stuck transaction
// shows as overdue with what it waits for; "recover now" (confirmed) ends it and the page shows
// the outcome without a reload, pushed over the WebSocket too; an abort of the now decided
// transaction is refused with the API's error shown; a page with a non-admin token sees every
// operator call refused; the same page served by `twopc console` (RELAY_URL) works through its
// relay, polling. Usage: node console.mjs URL TXID NON_ADMIN_TOKEN SCREENSHOT.png RELAY_URL
import { chromium } from 'playwright-core';

const [url, txId, viewer, screenshot, relay] = process.argv.slice(2);
if (!url || !txId || !viewer || !screenshot || !relay) {
  console.error('usage: node console.mjs URL TXID NON_ADMIN_TOKEN SCREENSHOT.png RELAY_URL');
  process.exit(2);
}
const check = (ok, what) => { if (!ok) throw new Error(what); };
const text = (page, sel) => page.$eval(sel, (e) => e.textContent);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.setDefaultTimeout(20000);
  await page.goto(`${url}/console`);
  await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'live');
  await page.waitForFunction(() => Number(document.querySelector('#counts b[data-value=overdue]')?.textContent) >= 1);

  // GIVEN the stuck transaction, listed among the overdue ones with what it waits for.
  await page.check('input[name=overdue]');
  await page.click('#filter button[type=submit]');
  const row = `#list tr[data-tx-id="${txId}"]`;
  await page.waitForSelector(`${row}[data-overdue=true]`);
  const waits = await text(page, `${row} td:last-child`);
  check(waits.startsWith('recovery'), `the list says it waits for ${JSON.stringify(waits)}`);
  await page.click(row);
  await page.waitForFunction((id) => !document.querySelector('#tx').hidden
    && document.querySelector('#tx-id').textContent === id, txId);
  check((await page.$eval('#tx', (e) => e.dataset.overdue)) === 'true', 'the view does not say overdue');
  check((await text(page, '#tx-waiting')).startsWith('recovery'), 'the view does not say what it waits for');
  check((await page.$eval('#tx-participants tr[data-participant=accounts]', (e) => e.dataset.holds)) === 'nothing',
    'alice should hold nothing of it');
  await page.screenshot({ path: screenshot, fullPage: true });

  // WHEN recover now is confirmed (the confirmation says what will happen) ...
  await page.evaluate(() => { window.notReloaded = true; });
  await page.click('#recover');
  await page.waitForSelector('#confirm[open]');
  const said = await text(page, '#confirm-text');
  check(said.includes('whatever its backoff') && said.includes('aborted'), `the confirmation says ${JSON.stringify(said)}`);
  await page.click('#confirm-go');
  // THEN it ended, and the page shows so without a reload: the answer, the view, the pushed note.
  await page.waitForFunction(() => document.querySelector('#result').textContent.includes('PREPARING -> ABORTED'));
  await page.waitForFunction(() => document.querySelector('#tx').dataset.status === 'ABORTED');
  await page.waitForFunction((id) => [...document.querySelectorAll('#events li')]
    .some((li) => li.textContent.includes(`transaction.operator ${id} recover`)), txId);
  check(await page.evaluate(() => window.notReloaded === true), 'the page was reloaded');

  // An abort of the decided transaction is refused with the API's error shown.
  await page.click('#abort');
  await page.waitForSelector('#confirm[open]');
  check((await text(page, '#confirm-text')).includes('already_decided'), 'the abort confirmation does not warn');
  await page.click('#confirm-go');
  await page.waitForFunction(() => document.querySelector('#error').dataset.code === 'already_decided');
  const refusal = await text(page, '#error');
  check(refusal.startsWith('409 already_decided: abort refused'), `the refusal shows ${JSON.stringify(refusal)}`);
  check(await page.evaluate(() => window.notReloaded === true), 'the page was reloaded');

  // The item's view: alice's fence has the transaction's entry now.
  await page.click('#tx-participants tr[data-participant=accounts] a');
  await page.waitForFunction((id) => !document.querySelector('#item').hidden
    && document.querySelector('#item-facts tr[data-fact=fence]')?.textContent.includes(`${id} aborted`), txId);

  // A page with a token that is not an admin's sees every operator call refused.
  const other = await browser.newPage();
  other.setDefaultTimeout(20000);
  await other.goto(`${url}/console?token=${encodeURIComponent(viewer)}`);
  await other.waitForFunction(() => document.querySelector('#error').dataset.code === 'operator_forbidden');
  check((await text(other, '#error')).startsWith('403 operator_forbidden'), 'the refusal is not shown');
  check((await other.$$('#counts div')).length === 0 && (await other.$$('#list tr')).length === 0,
    'a non-admin page shows counts or transactions');

  // twopc console's page: the same views through its relay; no WebSocket token, so it polls.
  const relayed = await browser.newPage();
  relayed.setDefaultTimeout(20000);
  await relayed.goto(`${relay}/console#tx=${txId}`);
  await relayed.waitForFunction((id) => document.querySelector('#tx-id')?.textContent === id
    && document.querySelector('#tx').dataset.status === 'ABORTED', txId);
  check((await text(relayed, '#status')).startsWith('polling every 5 s'), 'the relayed page does not say it polls');
  check((await text(relayed, '#error')) === '', `the relayed page shows ${await text(relayed, '#error')}`);
  console.log(`console: ${txId} shown overdue (${waits}), recovered to ABORTED live, abort refused (409), non-admin refused (403), relayed page polls`);
} finally {
  await browser.close();
}
