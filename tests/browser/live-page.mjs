// The live page in headless Chromium: load it, submit a transfer of 7.25 from alice to bob, and see
// the update pushed over the WebSocket land on the page (alice's balance drops by exactly 7.25,
// whatever it was). Usage: node live-page.mjs URL SCREENSHOT.png
import { chromium } from 'playwright-core';

const [url, screenshot] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error('usage: node live-page.mjs URL SCREENSHOT.png');
  process.exit(2);
}
// Exact decimal arithmetic on the page's text (two decimals at most here): cents as BigInt.
function cents(text) {
  const [whole, frac = ''] = text.trim().split('.');
  const sign = whole.startsWith('-') ? -1n : 1n;
  return BigInt(whole) * 100n + sign * BigInt((frac + '00').slice(0, 2));
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(20000);
  await page.goto(url);
  await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'live');
  await page.waitForFunction(() => [...document.querySelectorAll('#accounts tr')].some((tr) => tr.dataset.id === 'alice'));
  const before = await page.evaluate(() => [...document.querySelectorAll('#accounts tr')]
    .find((tr) => tr.dataset.id === 'alice').children[1].textContent);
  const expected = cents(before) - 725n;
  await page.fill('input[name=from]', 'alice');
  await page.fill('input[name=to]', 'bob');
  await page.fill('input[name=amount]', '7.25');
  await page.click('button[type=submit]');
  await page.waitForFunction(() => document.querySelector('#answer')?.dataset.outcome === 'committed');
  // Pushed, not polled: the row changes when entity.committed arrives over the WebSocket.
  const after = await (await page.waitForFunction((was) => {
    const text = [...document.querySelectorAll('#accounts tr')]
      .find((tr) => tr.dataset.id === 'alice')?.children[1]?.textContent;
    return text !== was && text;
  }, before)).jsonValue();
  if (cents(after) !== expected) {
    throw new Error(`alice shows ${after} after the transfer; expected ${before} - 7.25`);
  }
  await page.waitForFunction(() => [...document.querySelectorAll('#log li')]
    .some((li) => li.textContent.includes('transaction.completed') && li.textContent.includes('COMMITTED')));
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`live page: transfer committed and pushed update shown (alice ${before} -> ${after})`);
} finally {
  await browser.close();
}
